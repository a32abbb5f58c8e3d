"""Peak memory of 100k judged GSM8K states against plain dicts from the same scorer.

    PYTHONPATH=src .venv/bin/python bench/bench_memory.py [--rows 100000] [--repeat 1] [--before SRC]

The rows are verl-layout GSM8K rows (``bench_cli_score.gsm8k_rows``: the bundled test set cycled,
every fourth answer wrong, each row with its own ``extra_info``). Each side runs in a fresh process:

- ``dicts``: ``json.loads`` of every line, then ``row["reward"] = compute_score(...)``;
- ``states``: ``judger.trainer.io.read_rollouts`` (what ``judger score`` reads), then
  ``state.reward = compute_score(...)`` with the same scorer.

Reported per side: the tracemalloc peak (Python allocations from the start of the read to the end
of judging, everything kept alive) and, from a second process without tracemalloc, the growth of
ru_maxrss over the same span. Both ratios should be <= 1.5x; RSS includes the allocator's slack.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))


def _judge_dicts(path: Path) -> int:
    from judger.scorers.math.gsm8k import compute_score

    with path.open() as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    for row in rows:
        row["reward"] = compute_score(row["response"], row["reward_model"]["ground_truth"])
    return len(rows)


def _judge_states(path: Path) -> int:
    from judger.scorers.math.gsm8k import compute_score
    from judger.trainer.io import read_rollouts

    states = read_rollouts(path).states
    for state in states:
        state.reward = compute_score(state.response, state.ground_truth)
    return len(states)


def child(variant: str, path: Path, trace: bool) -> None:
    # import everything first: only the data held by the judged rows is measured
    import judger.scorers.math.gsm8k
    import judger.trainer.io  # noqa: F401

    run = _judge_dicts if variant == "dicts" else _judge_states
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if trace:
        tracemalloc.start()
    n = run(path)
    peak = tracemalloc.get_traced_memory()[1] if trace else 0
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"n": n, "peak": peak, "rss_growth": (rss1 - rss0) * 1024}))


def measure(variant: str, path: Path, src: Path = ROOT / "src") -> dict[str, int]:
    """tracemalloc's peak from one process, RSS growth from another (tracemalloc's own tables inflate it)."""
    traced = _run(variant, path, "trace", src)
    plain = _run(variant, path, "rss", src)
    return {"n": traced["n"], "peak": traced["peak"], "rss_growth": plain["rss_growth"]}


def _run(variant: str, path: Path, mode: str, src: Path) -> dict[str, int]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run(
        [sys.executable, __file__, "--child", variant, str(path), mode],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--child", nargs=3, metavar=("VARIANT", "PATH", "MODE"))
    ap.add_argument(
        "--before", type=Path, help="another checkout's src/: its RolloutStates measured in the same rounds"
    )
    args = ap.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]), args.child[2] == "trace")
        return
    from bench_cli_score import gsm8k_rows

    mb = 1024 * 1024
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gsm8k.jsonl"
        gsm8k_rows(args.rows, path)
        print(f"### Peak memory, {args.rows:,} judged GSM8K rows\n")
        print(
            "| run | plain dicts: peak / RSS growth | RolloutStates: peak / RSS growth "
            "| ratio (peak) | ratio (RSS) | per state (peak) |"
        )
        print("|---|---:|---:|---:|---:|---:|")
        for i in range(args.repeat):
            dicts = measure("dicts", path)
            states = measure("states", path)
            extra = (states["peak"] - dicts["peak"]) / states["n"]
            print(
                f"| {i + 1} | {dicts['peak'] / mb:.0f} MB / {dicts['rss_growth'] / mb:.0f} MB "
                f"| {states['peak'] / mb:.0f} MB / {states['rss_growth'] / mb:.0f} MB "
                f"| {states['peak'] / dicts['peak']:.2f}x "
                f"| {states['rss_growth'] / dicts['rss_growth']:.2f}x | +{extra:.0f} B |"
            )
            if args.before is not None:
                old = measure("states", path, args.before.resolve())
                print(
                    f"| {i + 1}, before | | {old['peak'] / mb:.0f} MB / {old['rss_growth'] / mb:.0f} MB "
                    f"| {old['peak'] / dicts['peak']:.2f}x | {old['rss_growth'] / dicts['rss_growth']:.2f}x "
                    f"| +{(old['peak'] - dicts['peak']) / old['n']:.0f} B |"
                )


if __name__ == "__main__":
    main()
