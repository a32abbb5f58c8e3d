"""GSM8K: instructions per response, judger vs verl's gsm8k scorer, counted by Valgrind.

The paths of ``bench_gsm8k.py``, each in a process of its own under ``valgrind --tool=callgrind``,
which counts the instructions executed between two markers (the path's inputs built and the path
warmed on a few of them before the first, nothing after the second). judger's counts repeat to
within 0.1% from run to run (verl's to about 1%) whatever else the machine is doing, so a change to
the scorer can be weighed on a shared machine whose speed moves by more than the change. They are
not time: judger reads each state's fields from a 32-field instance dict and writes a reward dict
back, and takes more time per instruction than verl's loop over two lists (``bench_gsm8k.py``
gives the time).

    PYTHONPATH=src .venv/bin/python bench/bench_gsm8k_instructions.py     # needs valgrind
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench_gsm8k import build_responses, load_verl_gsm8k

PATHS = {
    "verl": "verl `gsm8k.compute_score` loop (raw)",
    "default": "judger `GSM8KJudgerConfig()` (default)",
    "compat": 'judger `GSM8KJudgerConfig(compat="verl")`',
    "scorer_default": "judger's batch scorer alone over the same lists (default)",
    "scorer_compat": 'judger\'s batch scorer alone over the same lists (compat="verl")',
    "floor": "judger's `batch_judge` with no scoring, rewards made beforehand (the floor)",
}
# Callgrind zeroes its counts on entering the first and writes them out on entering the second;
# nothing on the measured paths calls either
ZERO_AT, DUMP_AT = "time_thread_time_ns", "time_process_time_ns"


def measured(path: str, n: int) -> Callable[[], Any]:
    """The call to count for ``path``, its inputs built and the path warmed on a few of them."""
    from judger import GSM8KJudgerConfig, RolloutState
    from judger.scorers.math.gsm8k import make_batch_scorer

    pairs = build_responses(n)
    responses, labels = [r for r, _ in pairs], [gt for _, gt in pairs]
    if path == "verl":
        score = load_verl_gsm8k()[0].compute_score
        [score(r, gt) for r, gt in pairs[:50]]
        return lambda: [score(r, gt) for r, gt in pairs]
    if path.startswith("scorer_"):
        scorer = make_batch_scorer(None if path == "scorer_default" else "verl")
        scorer(responses[:50], labels[:50])
        return lambda: scorer(responses, labels)
    judger = GSM8KJudgerConfig(compat="verl" if path == "compat" else None).build()
    if path == "floor":
        made = [{"score": 0.0} for _ in range(n)]
        judger.batch_scorer = lambda responses, labels: made[: len(responses)]

    def states(k: int) -> list[RolloutState]:
        return [RolloutState(response=r, reward_model={"ground_truth": gt}) for r, gt in pairs[:k]]

    asyncio.run(judger.batch_judge(states(50)))
    batch = states(n)
    return lambda: asyncio.run(judger.batch_judge(batch))


def child(path: str, n: int) -> None:
    call = measured(path, n)
    time.thread_time_ns()
    call()
    time.process_time_ns()


def count(path: str, n: int, workdir: str) -> int:
    """Instructions executed by ``path`` over ``n`` responses, from a callgrind run of ``child``."""
    out = os.path.join(workdir, f"{path}.out")
    valgrind = ["valgrind", "--tool=callgrind", f"--zero-before={ZERO_AT}", f"--dump-before={DUMP_AT}"]
    script = [sys.executable, os.path.abspath(__file__), "--child", path, "-n", str(n)]
    command = [*valgrind, f"--callgrind-out-file={out}", *script]
    env = {**os.environ, "PYTHONHASHSEED": "0"}  # str hashes decide dict probing: fix them
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    dumps = [name for name in os.listdir(workdir) if name.startswith(f"{path}.out.")]
    if len(dumps) != 1:
        sys.exit(f"{path}: expected one dump between the markers, found {sorted(dumps)}")
    with open(os.path.join(workdir, dumps[0]), encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("summary:"):
                return int(line.split()[1])
    sys.exit(f"{path}: no summary line in {dumps[0]}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", type=int, default=20_000)
    parser.add_argument("--child", choices=sorted(PATHS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.n)
        return
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    # counts do not depend on what else runs: one process per core
    with tempfile.TemporaryDirectory() as workdir, ThreadPoolExecutor(os.cpu_count()) as pool:
        counts = dict(zip(PATHS, pool.map(lambda path: count(path, args.n, workdir), PATHS)))
    print(f"## GSM8K: instructions per response ({args.n:,} responses, callgrind)\n")
    print("| path | instructions per response | of verl's |")
    print("|---|---:|---:|")
    for path, label in PATHS.items():
        per = counts[path] / args.n
        print(f"| {label} | {per:,.0f} | {per / (counts['verl'] / args.n):.2f}x |")


if __name__ == "__main__":
    main()
