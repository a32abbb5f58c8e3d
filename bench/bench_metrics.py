"""Validation metrics: judger.trainer.metrics (vectorised) vs verl's own loop.

    .venv/bin/python bench/bench_metrics.py [--prompts 1000] [--n 16] [--loop-prompts 20]

verl's ``process_validation_metrics`` is run from its wheel when it has been fetched (verl imports
torch and transformers, so only the three functions are taken from its source file)::

    .venv/bin/pip download verl==0.9.1 --no-deps -d bench/.cache/wheels

Without it, a plain loop written here from verl's documented algorithm stands in.

Prints a markdown section. The batch is ``--prompts`` prompts x ``--n`` samples x 3 numeric
variables (score, acc, length) plus ``pred`` for maj@k. The loop (one (uid, variable, k) at a time,
re-seeding before each bootstrap, as verl does) is timed on the first ``--loop-prompts`` prompts
and its per-(uid, variable) cost extrapolated to the full batch; on that subset both give equal
results (checked here, bit for bit).
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections import defaultdict
from functools import partial
from typing import Any

import numpy as np

from judger.trainer.metrics import bootstrap_sizes, process_validation_metrics


def _bootstrap(data: list[Any], size: int, fns: list[Any], seed: int = 42) -> list[tuple[float, float]]:
    rng = np.random.RandomState(seed)  # verl seeds the global legacy generator: same stream
    lists: list[list[Any]] = [[] for _ in fns]
    for _ in range(1000):
        picked = [data[i] for i in rng.choice(len(data), size=size, replace=True)]
        for i, fn in enumerate(fns):
            lists[i].append(fn(picked))
    return [(np.mean(v), np.std(v)) for v in lists]


def _maj(data: list[dict[str, Any]]) -> Any:
    votes: dict[Any, list[Any]] = defaultdict(list)
    for d in data:
        votes[d["pred"]].append(d["val"])
    counts = {k: len(v) for k, v in votes.items()}
    return votes[max(counts, key=counts.get)][0]


def verl_loop(data_sources: list[str], uids: list[Any], infos: dict[str, list[Any]]) -> dict:
    grouped: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for i, ds in enumerate(data_sources):
        for var, vals in infos.items():
            grouped[ds][uids[i]][var].append(vals[i])
    collected: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for ds, uid2var in grouped.items():
        for var2vals in uid2var.values():
            for var, vals in var2vals.items():
                if isinstance(vals[0], str):
                    continue
                n = len(vals)
                m: dict[str, Any] = {f"mean@{n}": np.mean(vals)}
                if n > 1:
                    m[f"std@{n}"] = np.std(vals)
                    for k in bootstrap_sizes(n):
                        (bm, bs), (wm, ws) = _bootstrap(vals, k, [np.max, np.min])
                        m.update(
                            {
                                f"best@{k}/mean": bm,
                                f"best@{k}/std": bs,
                                f"worst@{k}/mean": wm,
                                f"worst@{k}/std": ws,
                            }
                        )
                        if "pred" in var2vals:
                            votes = [{"val": v, "pred": p} for v, p in zip(vals, var2vals["pred"])]
                            [(mm, ms)] = _bootstrap(votes, k, [partial(_maj)])
                            m.update({f"maj@{k}/mean": mm, f"maj@{k}/std": ms})
                for name, value in m.items():
                    collected[ds][var][name].append(value)
    return {
        ds: {var: {name: float(np.mean(v)) for name, v in metrics.items()} for var, metrics in var2.items()}
        for ds, var2 in collected.items()
    }


def load_verl() -> tuple[Any, str] | None:
    """verl's process_validation_metrics from a downloaded wheel under bench/.cache, if any."""
    import ast
    import zipfile
    from collections.abc import Callable
    from pathlib import Path

    wheels = sorted((Path(__file__).parent / ".cache" / "wheels").glob("verl-*.whl"))
    if not wheels:
        return None
    with zipfile.ZipFile(wheels[-1]) as wheel:
        source = wheel.read("verl/trainer/ppo/metric_utils.py").decode()
    wanted = {"bootstrap_metric", "calc_maj_val", "process_validation_metrics"}
    tree = ast.parse(source)
    tree.body = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in wanted]
    namespace: dict[str, Any] = {
        "np": np,
        "defaultdict": defaultdict,
        "partial": partial,
        "Any": Any,
        "Callable": Callable,
    }
    # benchmark-only: run verl's own functions (not model output) without importing verl
    exec(compile(tree, str(wheels[-1]), "exec"), namespace)
    return namespace["process_validation_metrics"], wheels[-1].name.split("-")[1]


def plain(metrics: Any) -> dict:
    return {
        ds: {var: {k: float(v) for k, v in m.items()} for var, m in d.items()} for ds, d in metrics.items()
    }


def make_batch(prompts: int, n: int, seed: int = 0) -> tuple[list[str], list[int], dict[str, list[Any]]]:
    rng = np.random.default_rng(seed)
    size = prompts * n
    acc = (rng.random(size) < rng.random(prompts).repeat(n)).tolist()
    infos = {
        "score": [1.0 if a else -1.0 for a in acc],
        "acc": acc,
        "length": rng.integers(50, 4000, size).astype(float).tolist(),
        "pred": rng.integers(0, 5, size).astype(str).tolist(),
    }
    return ["math"] * size, np.repeat(np.arange(prompts), n).tolist(), infos


def best_of(repeat: int, fn: Any) -> tuple[float, float]:
    """Best wall time and best CPU time (all threads) of ``repeat`` runs."""
    walls, cpus = [], []
    for _ in range(repeat):
        start, cpu = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=1000)
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--loop-prompts", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    ds, uids, infos = make_batch(args.prompts, args.n)
    fast, fast_cpu = best_of(args.repeat, lambda: process_validation_metrics(ds, uids, infos))
    fast_verl_set, verl_set_cpu = best_of(
        args.repeat, lambda: process_validation_metrics(ds, uids, infos, pass_k=False)
    )

    m = args.loop_prompts * args.n
    sub = ds[:m], uids[:m], {k: v[:m] for k, v in infos.items()}
    verl = load_verl()
    baseline = "verl-style loop (written from the documented algorithm)"
    run_loop: Any = verl_loop
    if verl is not None:
        baseline = f"verl {verl[1]}'s own process_validation_metrics"
        run_loop = verl[0]
    start, cpu = time.perf_counter(), time.process_time()
    state = np.random.get_state()
    expected = plain(run_loop(*sub))
    np.random.set_state(state)  # verl re-seeds the global generator; leave it as it was
    loop_s = time.perf_counter() - start
    loop_cpu = time.process_time() - cpu
    got = plain(process_validation_metrics(*sub, pass_k=False))
    equal = got == expected
    per_uid_var = loop_s / (args.loop_prompts * 3)
    loop_full = per_uid_var * args.prompts * 3
    loop_full_cpu = loop_cpu / (args.loop_prompts * 3) * args.prompts * 3

    print(f"## Validation metrics ({args.prompts} prompts x {args.n} samples x 3 variables + pred)\n")
    print(
        f"Machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
        f"NumPy {np.__version__}.\n"
    )
    print("| implementation | wall time | CPU time | per (prompt, variable), wall | ratio (wall) |")
    print("|---|---|---|---|---|")
    print(
        f"| {baseline} (measured on {args.loop_prompts} prompts, extrapolated) | {loop_full:.1f} s | "
        f"{loop_full_cpu:.1f} s | {per_uid_var * 1e3:.1f} ms | 1x |"
    )
    for label, wall, cpu_s in (
        ("judger.trainer.metrics, verl's metric set", fast_verl_set, verl_set_cpu),
        ("judger.trainer.metrics, plus pass@k", fast, fast_cpu),
    ):
        per = wall / (args.prompts * 3) * 1e6
        print(f"| {label} | {wall:.3f} s | {cpu_s:.3f} s | {per:.0f} us | {loop_full / wall:.0f}x faster |")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\nLoad average during the run: {load:.1f} on {os.cpu_count()} cores.")
    print(f"\nSame results as the baseline on the measured subset, bit for bit: {'yes' if equal else 'NO'}.")


if __name__ == "__main__":
    main()
