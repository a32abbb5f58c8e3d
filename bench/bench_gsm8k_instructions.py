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
import gc
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from bench_gsm8k import PATHS, build_responses, load_verl_gsm8k, paths

# Callgrind zeroes its counts on entering the first and writes them out on entering the second;
# nothing on the measured paths calls either
ZERO_AT, DUMP_AT = "time_thread_time_ns", "time_process_time_ns"


def child(path: str, n: int) -> None:
    """Counted between the markers: ``path`` over ``n`` responses, after one call over a few of them
    (caches filled, first-call costs paid) and its inputs built."""
    score = load_verl_gsm8k()[0].compute_score
    pairs = build_responses(n)
    paths(pairs[:50], score)[path]()()
    call = paths(pairs, score)[path]()
    gc.collect()  # as before each timed call: what is collected inside depends on the heap before
    time.thread_time_ns()
    call()
    time.process_time_ns()


def count(path: str, n: int, workdir: str, cache_sim: bool) -> dict[str, int]:
    """Callgrind's counts for ``path`` over ``n`` responses (``Ir``: instructions; with ``cache_sim``
    also ``D1mr`` and ``D1mw``, its model's first-level data-cache read and write misses)."""
    out = os.path.join(workdir, f"{path}.out")
    valgrind = ["valgrind", "--tool=callgrind", f"--zero-before={ZERO_AT}", f"--dump-before={DUMP_AT}"]
    valgrind += ["--cache-sim=yes"] if cache_sim else []
    script = [sys.executable, os.path.abspath(__file__), "--child", path, "-n", str(n)]
    command = [*valgrind, f"--callgrind-out-file={out}", *script]
    env = {**os.environ, "PYTHONHASHSEED": "0"}  # str hashes decide dict probing: fix them
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    dumps = [name for name in os.listdir(workdir) if name.startswith(f"{path}.out.")]
    if len(dumps) != 1:
        sys.exit(f"{path}: expected one dump between the markers, found {sorted(dumps)}")
    events: list[str] = []
    with open(os.path.join(workdir, dumps[0]), encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith("summary:"):
                return dict(zip(events, map(int, line.split()[1:])))
    sys.exit(f"{path}: no summary line in {dumps[0]}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", type=int, default=20_000)
    parser.add_argument("--cache-sim", action="store_true", help="also count callgrind's cache misses")
    parser.add_argument("--child", choices=sorted(PATHS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.n)
        return
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    # counts do not depend on what else runs: one process per core
    with tempfile.TemporaryDirectory() as workdir, ThreadPoolExecutor(os.cpu_count()) as pool:
        found = pool.map(lambda path: count(path, args.n, workdir, args.cache_sim), PATHS)
        counts = dict(zip(PATHS, found))
    events = ["Ir", "D1mr", "D1mw"] if args.cache_sim else ["Ir"]
    names = {"Ir": "instructions", "D1mr": "L1 data read misses", "D1mw": "L1 data write misses"}
    print(f"## GSM8K: callgrind's counts per response ({args.n:,} responses)\n")
    print("| path | " + " | ".join(f"{names[e]} per response | of verl's" for e in events) + " |")
    print("|---|" + "---:|---:|" * len(events))
    for path, label in PATHS.items():
        ours, verl = counts[path], counts["verl"]
        cells = [f"{ours[e] / args.n:,.1f} | {ours[e] / verl[e]:.2f}x" for e in events]
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
