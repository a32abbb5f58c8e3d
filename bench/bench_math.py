"""MATH judging throughput: MathJudgerConfig vs raw Math-Verify parse + verify in one process.

    .venv/bin/python bench/bench_math.py                # throughput + verdict comparison
    .venv/bin/python bench/bench_math.py --check-verl   # compat="verl" vs verl's own modules

Both sides judge the 400 real responses of ``../shared/data/math_rollouts_dev.jsonl`` repeated to
4,000. The raw side is what a verl-style scorer does per sample: ``parse(\\boxed{gt})``,
``parse(response)``, ``verify(gold, pred)``, serially. ``--check-verl`` loads verl's scorer
modules by file path from an unpacked verl wheel (``bench/.cache/verl_wheel``) and mathruler
(``bench/.cache/math/site``) and compares scores case by case.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT.parent / "shared" / "data" / "math_rollouts_dev.jsonl"
VERL_DIR = ROOT / "bench" / ".cache" / "verl_wheel" / "verl" / "utils" / "reward_score"
MATHRULER_SITE = ROOT / "bench" / ".cache" / "math" / "site"


def load_rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in DEV.read_text().splitlines() if line.strip()]


def raw_math_verify(rows: list[dict[str, Any]]) -> tuple[list[bool], float]:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    started = time.perf_counter()
    verdicts = []
    for row in rows:
        gold = parse("\\boxed{" + row["reward_model"]["ground_truth"] + "}", [LatexExtractionConfig()])
        pred = parse(row["response"], [LatexExtractionConfig(), ExprExtractionConfig()])
        verdicts.append(bool(verify(gold, pred)))
    return verdicts, time.perf_counter() - started


async def judged(rows: list[dict[str, Any]], batch: int) -> tuple[list[bool], float]:
    from judger import MathJudgerConfig, RolloutState

    judge = MathJudgerConfig().build()
    states = [
        RolloutState(message=r["prompt"], response=r["response"], reward_model=r["reward_model"])
        for r in rows
    ]
    started = time.perf_counter()
    out = []
    for i in range(0, len(states), batch):
        out += await judge.batch_judge(states[i : i + batch])
    elapsed = time.perf_counter() - started
    failed = [s.error_msg for s in out if s.reward is None]
    if failed:
        raise SystemExit(f"{len(failed)} samples failed: {failed[:3]}")
    return [bool(s.reward["acc"]) for s in out], elapsed


def throughput(repeat: int) -> None:
    from judger.runtime.procpool.shared import shared_pool

    dev = load_rows()
    rows = dev * repeat
    n = len(rows)
    pool = shared_pool()
    started = time.perf_counter()
    pool.run_sync(abs, -1)
    startup = time.perf_counter() - started
    asyncio.run(judged(dev[:16], 16))  # warm the workers' imports

    raw, raw_s = raw_math_verify(rows)
    results = {}
    for label, batch in (
        ("one batch of 4,000", n),
        ("batches of 400 (no reuse across batches)", len(dev)),
        ("4,000 single judge() calls, 64 in flight (no dedup)", 1),
    ):
        verdicts, seconds = asyncio.run(judged(rows, batch))
        results[label] = (verdicts, seconds)

    print(f"## MATH: MathJudgerConfig vs raw Math-Verify ({n:,} responses = 400 dev x {repeat})\n")
    print(f"Machine: {os.cpu_count()} CPUs; pool: {pool.workers} workers ({pool.start_method}).")
    print(f"Pool start (fork server + Math-Verify preload + first worker): {startup:.2f} s, not counted.\n")
    print("| judge | seconds | responses/s | ratio vs raw |")
    print("|---|---|---|---|")
    print(f"| raw math_verify parse+verify, one process | {raw_s:.2f} | {n / raw_s:,.0f} | 1.00x |")
    for label, (_, seconds) in results.items():
        print(f"| MathJudgerConfig, {label} | {seconds:.2f} | {n / seconds:,.0f} | {raw_s / seconds:.2f}x |")
    verdicts = results["one batch of 4,000"][0]
    differ = sorted({i % len(dev) for i, (a, b) in enumerate(zip(raw, verdicts)) if a != b})
    print(f"\nVerdicts differing from raw Math-Verify: {len(differ)} of {len(dev)} distinct rows")
    for i in differ:
        r = dev[i]
        print(
            f"- row {i}: gt {r['reward_model']['ground_truth']!r}, raw={raw[i]}, ours={verdicts[i]}, "
            f"reference grader={r['reference_grader']['correct']}"
        )
    print(f"\nPool calls in all (the dedup at work): {pool.stats()['calls']:,}")
    startup_table()


def startup_table() -> None:
    """Time from a new pool's first call to its first Math-Verify result: what a replacement costs."""
    from judger.runtime.procpool.pool import ProcessPool
    from judger.scorers.math.grade import equivalent

    print("\n| new worker, first Math-Verify call | seconds |")
    print("|---|---|")
    for label, method in (
        ("forkserver (server running, Math-Verify preloaded)", "forkserver"),
        ("spawn", "spawn"),
    ):
        with ProcessPool(1, start_method=method) as pool:
            started = time.perf_counter()
            pool.run_sync(equivalent, "1", "2")
            print(f"| {label} | {time.perf_counter() - started:.3f} |")


# --- compat="verl" against verl's own code ------------------------------------------------------------

ANSWERS = [
    "5", "5.0", "\\frac12", "\\frac{1}{2}", "0.5", "1/2", "\\dfrac{3}{4}", "x=5", "k = 3", "\\sqrt3",
    "\\sqrt{3}", "2\\sqrt2", "10\\%", "\\$5", "5\\text{ cm}", "5\\text{ cm}\\text{ m}", "\\sqrt", "\\frac",
    "a\\frac", "\\frac1", "3/x", "{.5}", ".5", " .5", "90^\\circ", "90^{\\circ}", "\\left(1,2\\right)",
    "(1, 2)", "\\text{(A)}", "A", "\\boxed{5}", "72.", "1,000", "\\infty", "-\\frac{\\pi}{2}", "\\!5", "5\n",
    "", " ", "=5", "a=b=c", "\\frac{a}{b}/c", "4/8", "04/8", "-1/2", "\\tfrac{1}{2}", "\\\\frac12",
    "x \\in [1,2]", "\\mathbf{5}", "5 \\text{ dollars}", "\\$18.90",
]  # fmt: skip
WRAPPERS = [
    "The answer is \\boxed{%s}.", "\\boxed %s$ end", "\\fbox{%s}", "$\\boxed{%s}$ and \\boxed{9}",
    "\\boxed{%s", "Answer: %s", "Answer: $%s$", "answer : %s\nmore", "<think>x</think> so \\boxed{%s}",
    "<think>x</think>",
    "\\boxed{\\boxed{%s}}", "Final Answer: The final answer is $%s$. I hope it is correct.", "%s",
    "no answer",
]  # fmt: skip
LABELS = [
    "5",
    "\\frac{1}{2}",
    "3",
    "(1,2)",
    "A",
    "1000",
    "\\frac{3}{4}",
    "90",
    "\\sqrt{3}",
    "10",
    "18.90",
    "72",
]


def _load_verl(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"verl_{name}", VERL_DIR / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_verl() -> None:
    import contextlib
    import io

    from judger.scorers.math import dapo, geo3k
    from judger.scorers.math import reward as math_reward
    from judger.scorers.math import verify as math_verify_reward

    if not VERL_DIR.exists():
        raise SystemExit(
            f"unpack a verl wheel into {VERL_DIR.parents[2]} first (pip download verl --no-deps)"
        )
    sys.path.insert(0, str(MATHRULER_SITE))
    v_math, v_dapo, v_mv = _load_verl("math_reward"), _load_verl("math_dapo"), _load_verl("math_verify")
    v_geo = _load_verl("geo3k") if importlib.util.find_spec("mathruler") else None
    cases = [(r["response"], r["reward_model"]["ground_truth"]) for r in load_rows()]
    for answer in ANSWERS:
        for wrapper in WRAPPERS:
            text = wrapper.replace("%s", answer)
            cases += [(text, label) for label in LABELS] + [(text, answer)]
    diffs = {"math_reward": 0, "math_dapo": 0, "math_dapo strict": 0, "geo3k": 0, "math_verify": 0}
    checked = dict.fromkeys(diffs, 0)
    for k, (text, label) in enumerate(cases):
        with contextlib.redirect_stdout(io.StringIO()):  # verl prints its exceptions
            theirs = v_math.compute_score(text, label)
        checked["math_reward"] += 1
        diffs["math_reward"] += theirs != math_reward.compute_score(text, label, compat="verl")["score"]
        for strict in (False, True):
            key = "math_dapo strict" if strict else "math_dapo"
            ours = dapo.compute_score(text, label, compat="verl", strict_box_verify=strict)
            checked[key] += 1
            diffs[key] += v_dapo.compute_score(text, label, strict_box_verify=strict) != {
                k2: ours[k2] for k2 in ("score", "acc", "pred")
            }
        if v_geo is not None and k % 5 == 0:
            checked["geo3k"] += 1
            diffs["geo3k"] += (
                v_geo.compute_score(text, label) != geo3k.compute_score(text, label, compat="verl")["score"]
            )
        if k < 400 or k % 20 == 0:
            # verl runs this function in its spawn pool; here in the main thread, where its alarms work
            checked["math_verify"] += 1
            theirs = v_mv._verify_in_subprocess("\\boxed{" + label + "}", text)
            diffs["math_verify"] += (
                theirs != math_verify_reward.compute_score(text, label, compat="verl")["score"]
            )
    print("## compat='verl' vs verl 0.9.1's scorer modules\n")
    print("| scorer | cases | differences |")
    print("|---|---|---|")
    for key in diffs:
        print(f"| {key} | {checked[key]:,} | {diffs[key]} |")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=10, help="copies of the 400 dev responses (default 10)")
    parser.add_argument("--check-verl", action="store_true", help="compare compat='verl' with verl's code")
    args = parser.parse_args()
    if not DEV.exists():
        raise SystemExit(f"{DEV} not found")
    import logging

    logging.disable(logging.WARNING)  # Math-Verify warns per unparseable answer
    if args.check_verl:
        check_verl()
    else:
        throughput(args.repeat)


if __name__ == "__main__":
    main()
