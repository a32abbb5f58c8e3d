"""Process-pool hand-off per sample on trivial answers: ProcessPool.map vs inline.

    PYTHONPATH=src .venv/bin/python bench/bench_procpool_handoff.py [--n 20000] [--repeat 5]

``ProcessPool.map`` of ``--n`` distinct trivial calls (a function returning a small dict) on 2
workers, against the same calls inline in this process; both sides in one run, alternating; medians.
Target: <= 30 us a sample through the pool.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from typing import Any

from judger.runtime.procpool.pool import ProcessPool
from judger.testing.handlers import exact_match


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    calls: list[Any] = [((str(i), "7", {}), {}) for i in range(args.n)]
    pool = ProcessPool(2, timeout=30)
    asyncio.run(pool.map(exact_match, calls[:100]))  # start the workers
    inline, pooled = [], []
    for _ in range(args.repeat):
        start = time.perf_counter()
        [exact_match(*a, **k) for a, k in calls]
        inline.append(time.perf_counter() - start)
        start = time.perf_counter()
        out = asyncio.run(pool.map(exact_match, calls))
        pooled.append(time.perf_counter() - start)
        assert not any(isinstance(r, BaseException) for r in out)
    pool.close()
    a, b = statistics.median(pooled) / args.n * 1e6, statistics.median(inline) / args.n * 1e6
    print("### Process-pool hand-off\n")
    print("| path | us / sample | target |")
    print("|---|---:|---|")
    print(f"| ProcessPool.map, 2 workers, {args.n:,} trivial calls | {a:.1f} | <= 30 |")
    print(f"| inline, same calls | {b:.1f} | |")
    print(f"\n{os.cpu_count()} CPUs; 1-minute load average {os.getloadavg()[0]:.1f}.")


if __name__ == "__main__":
    main()
