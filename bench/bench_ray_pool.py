"""A 2-worker JudgerPool vs a local NativeJudger on a CPU-bound scorer (~2 ms of pure Python each).

    .venv/bin/python bench/bench_ray_pool.py [--n 2000] [--workers 2] [--ms 2.0] [--repeat 3]

Prints a markdown section. Both sides score the same prebuilt RolloutStates with the same handler;
the handler's loop count is calibrated in this process to take ``--ms`` per call. The pool is built
and warmed up (actors started, first batch run) before timing: start-up is reported separately.
Times are the median of ``--repeat`` runs, alternating local and pool so machine noise hits both.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from typing import Any

from judger import CPUResourcesConfig, JudgerConfig, RolloutState

LOOPS = 1000  # set by calibrate(); shipped to the actors inside the handler's extra_info


def burn(response: str, label: Any, extra_info: dict[str, Any]) -> dict[str, Any]:
    """Pure-Python busy work (holds the GIL, like a regex- or sympy-heavy scorer)."""
    acc = 0
    for i in range(extra_info["loops"]):
        acc = (acc * 31 + i) % 1_000_003
    return {"score": float(response == label), "acc": acc}


def calibrate(ms: float) -> int:
    loops = 10_000
    while True:
        start = time.perf_counter()
        burn("", "", {"loops": loops})
        took = time.perf_counter() - start
        if took > 0.02:
            return max(1, int(loops * (ms / 1000) / took))
        loops *= 2


def states(n: int) -> list[RolloutState]:
    return [
        RolloutState(
            message=[{"role": "user", "content": f"q{i}"}],
            response=str(i % 5),
            reward_model={"ground_truth": "3"},
        )
        for i in range(n)
    ]


def timed(judger: Any, batch: list[RolloutState]) -> float:
    async def go() -> None:
        out = await judger.batch_judge(batch)
        assert all(s.reward is not None for s in out), "a sample failed"

    start = time.perf_counter()
    asyncio.run(go())
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--ms", type=float, default=2.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    loops = calibrate(args.ms)
    cfg = JudgerConfig(judger_name="burn", reward_handler=burn, extra_info={"loops": loops})
    local = cfg.build()
    start = time.perf_counter()
    pool = cfg.model_copy(
        update={"cpu_resources": CPUResourcesConfig(num_workers=args.workers, num_cpus_per_worker=1)}
    ).build()
    built = time.perf_counter() - start
    timed(pool, states(200))  # warm-up: actor event loops, thread pools, Ray connections
    one = timed(local, states(200)) / 200

    local_times, pool_times = [], []
    for _ in range(args.repeat):
        local_times.append(timed(local, states(args.n)))
        pool_times.append(timed(pool, states(args.n)))
    pool.close()
    local.close()

    t_local, t_pool = statistics.median(local_times), statistics.median(pool_times)
    title = f"{args.n} samples, ~{args.ms:g} ms pure-Python scorer, {os.cpu_count()} CPUs"
    print(f"### Ray pool vs local ({title})\n")
    print("| judger | median s | samples / s | speed-up |")
    print("|---|---:|---:|---:|")
    print(f"| local NativeJudger (threads) | {t_local:.2f} | {args.n / t_local:.0f} | 1.00x |")
    print(
        f"| JudgerPool, {args.workers} workers x 1 CPU | {t_pool:.2f} | {args.n / t_pool:.0f} | "
        f"{t_local / t_pool:.2f}x |"
    )
    runs_local = ", ".join(f"{t:.2f}" for t in local_times)
    runs_pool = ", ".join(f"{t:.2f}" for t in pool_times)
    print(
        f"\nScorer: {loops} loop iterations = {one * 1000:.2f} ms per sample through the local judger. "
        f"Runs: local {runs_local} s; pool {runs_pool} s. "
        f"Building the pool (Ray start + {args.workers} actors) took {built:.1f} s, not counted."
    )


if __name__ == "__main__":
    main()
