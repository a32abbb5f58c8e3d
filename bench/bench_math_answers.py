"""Seconds per distinct answer of the default MATH grading, this tree against a baseline tree.

    PYTHONPATH=src .venv/bin/python bench/bench_math_answers.py --baseline /tmp/orig/src [--rounds 3]

The 400 real responses of ``../shared/data/math_rollouts_dev.jsonl`` reduce to their distinct
(boxed answer, label) pairs, the unit the judger grades once per batch.
Each round grades all of them in a fresh process per tree (this tree, then the baseline,
alternating, so that both see the same machine load), after one warm-up call; the table gives the
median round; the last column is the judger's extraction in the calling process (``preprocess``:
the box, and here the prompt's order request), per response. Verdicts that differ are listed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT.parent / "shared" / "data" / "math_rollouts_dev.jsonl"
if not DEV.exists():
    DEV = ROOT.parents[1] / "shared" / "data" / "math_rollouts_dev.jsonl"


def child() -> None:
    """Grade every distinct answer once (after a warm-up) and print seconds and verdicts as JSON."""
    from judger import RolloutState
    from judger.presets.math import MathJudgerConfig
    from judger.scorers.math.reward import compute_score

    judge = MathJudgerConfig().build()
    rows = [json.loads(line) for line in DEV.read_text().splitlines() if line.strip()]
    jobs: dict[str, tuple[Any, str, dict[str, Any]]] = {}
    started = time.perf_counter()
    for r in rows * 10:
        judge.preprocess(
            RolloutState(message=r["prompt"], response=r["response"], reward_model=r["reward_model"])
        )
    preprocess = (time.perf_counter() - started) / (10 * len(rows))
    for r in rows:
        state = RolloutState(message=r["prompt"], response=r["response"], reward_model=r["reward_model"])
        payload = judge.preprocess(state)
        kwargs = payload.get("scorer_kwargs") or {}
        key = repr((payload["response"], payload["label"]))  # the baseline's kwargs may differ
        jobs[key] = (payload["response"], payload["label"], kwargs)
    compute_score("x+2", "2+x", extracted=True)  # imports and Math-Verify's first parse: not timed
    started = time.perf_counter()
    verdicts = {k: compute_score(a, label, **kw)["acc"] for k, (a, label, kw) in jobs.items()}
    seconds = time.perf_counter() - started
    print(json.dumps({"seconds": seconds, "preprocess": preprocess, "verdicts": verdicts}))


def run(src: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": src}
    done = subprocess.run(
        [sys.executable, __file__, "--child"], env=env, capture_output=True, text=True, timeout=1800
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--baseline", help="the src/ directory of the tree to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child()
        return
    if not args.baseline:
        parser.error("--baseline is required")
    trees = {"this tree": str(ROOT / "src"), "baseline": args.baseline}
    seconds: dict[str, list[float]] = {name: [] for name in trees}
    preprocess: dict[str, list[float]] = {name: [] for name in trees}
    verdicts: dict[str, dict[str, bool]] = {}
    for _ in range(args.rounds):
        for name, src in trees.items():
            out = run(src)
            seconds[name].append(out["seconds"])
            preprocess[name].append(out["preprocess"])
            verdicts[name] = out["verdicts"]
    n = len(verdicts["this tree"])
    print(f"{n} distinct answers of {DEV.name}; median of {args.rounds} rounds, one process each\n")
    print("| tree | seconds (median) | ms per distinct answer | rounds | extraction, us per response |")
    print("|---|---|---|---|---|")
    for name, values in seconds.items():
        med = statistics.median(values)
        rounds = ", ".join(f"{v:.3f}" for v in values)
        extract = 1e6 * statistics.median(preprocess[name])
        print(f"| {name} | {med:.3f} | {1000 * med / n:.2f} | {rounds} | {extract:.0f} |")
    ours, base = verdicts["this tree"], verdicts["baseline"]
    differ = [k for k in ours if k in base and ours[k] != base[k]]
    print(f"\nverdicts that differ: {len(differ)} (of {len(ours.keys() & base.keys())} graded by both)")
    for k in differ:
        print(f"- {k[:200]}: this tree {ours[k]}, baseline {base[k]}")


if __name__ == "__main__":
    main()
