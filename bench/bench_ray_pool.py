"""A 2-worker JudgerPool vs a local NativeJudger on a CPU-bound scorer (~2 ms of pure Python each).

    .venv/bin/python bench/bench_ray_pool.py [--n 2000] [--workers 2] [--ms 2.0] [--repeat 3]

Prints a markdown section. Both sides score the same prebuilt RolloutStates with the same handler;
the handler's loop count is calibrated in this process to take ``--ms`` of CPU per call. The pool is built
and warmed up (actors started, first batch run) before timing: start-up is reported separately.
Times are the median of ``--repeat`` runs, alternating local and pool so machine noise hits both.
"CPU ms / sample" is CPU time (driver process, plus the actors for the pool) per sample: unlike
wall time it does not depend on what else the machine is running; "cores busy" is CPU / wall time,
how many cores the judger actually got (at most 1 for the local one, whose handler holds the GIL).
The "ceiling" row runs the same burns split over plain worker processes with no judger at all: the
best any multi-process judger could do on this machine at that moment.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
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
    """Loop count for ``ms`` of CPU time (process time, so other load on the machine does not skew it)."""
    loops = 10_000
    while True:
        took = []
        for _ in range(3):  # the fastest of three: the first call also warms caches up
            start = time.process_time()
            burn("", "", {"loops": loops})
            took.append(time.process_time() - start)
        if min(took) > 0.05:
            return max(1, int(loops * (ms / 1000) / min(took)))
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


def timed(judger: Any, batch: list[RolloutState]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (this process plus the pool's actors) of one batch_judge."""

    async def actor_cpu() -> float:
        replicas = getattr(judger, "replicas", None) or ([judger] if hasattr(judger, "actor_stats") else [])
        return sum([(await r.actor_stats())["cpu_s"] for r in replicas])

    async def go() -> tuple[float, float]:
        cpu0, actors0 = time.process_time(), await actor_cpu()
        start = time.perf_counter()
        out = await judger.batch_judge(batch)
        wall = time.perf_counter() - start
        assert all(s.reward is not None for s in out), "a sample failed"
        return wall, time.process_time() - cpu0 + await actor_cpu() - actors0

    return asyncio.run(go())


def burn_many(count: int, loops: int) -> float:
    start = time.process_time()
    for _ in range(count):
        burn("", "", {"loops": loops})
    return time.process_time() - start


def raw_parallel(executor: ProcessPoolExecutor, n: int, workers: int, loops: int) -> tuple[float, float]:
    """The machine's ceiling: ``n`` burns split over ``workers`` plain processes, no judger at all."""
    start = time.perf_counter()
    cpu = sum(executor.map(burn_many, [n // workers] * workers, [loops] * workers))
    return time.perf_counter() - start, cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--ms", type=float, default=2.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--actor-threads", type=int, default=None, help="num_threads of the judger in each actor")
    args = ap.parse_args()

    load_before = os.getloadavg()[0]
    loops = calibrate(args.ms)
    # on threads, as measured before handlers a worker can load went to worker processes by default
    cfg = JudgerConfig(
        judger_name="burn", reward_handler=burn, extra_info={"loops": loops}, execution="thread"
    )
    local = cfg.build()
    start = time.perf_counter()
    resources = CPUResourcesConfig(num_workers=args.workers, num_cpus_per_worker=1)
    pool = cfg.model_copy(update={"cpu_resources": resources, "num_threads": args.actor_threads}).build()
    built = time.perf_counter() - start
    timed(pool, states(200))  # warm-up: actor event loops, thread pools, Ray connections
    one = timed(local, states(200))[1] / 200

    executor = ProcessPoolExecutor(args.workers)
    raw_parallel(executor, 2 * args.workers, args.workers, loops)  # start the processes

    local_runs, pool_runs, raw_runs = [], [], []
    for _ in range(args.repeat):
        local_runs.append(timed(local, states(args.n)))
        pool_runs.append(timed(pool, states(args.n)))
        raw_runs.append(raw_parallel(executor, args.n, args.workers, loops))
    executor.shutdown()
    pool.close()
    local.close()
    raw_times = [w for w, _ in raw_runs]
    t_raw = statistics.median(raw_times)
    cpu_raw = statistics.median(c for _, c in raw_runs) / args.n * 1000

    local_times, pool_times = [w for w, _ in local_runs], [w for w, _ in pool_runs]
    t_local, t_pool = statistics.median(local_times), statistics.median(pool_times)
    cpu_local = statistics.median(c for _, c in local_runs) / args.n * 1000
    cpu_pool = statistics.median(c for _, c in pool_runs) / args.n * 1000
    title = f"{args.n} samples, ~{args.ms:g} ms pure-Python scorer, {os.cpu_count()} CPUs"
    print(f"### Ray pool vs local ({title})\n")
    print("| judger | median s | samples / s | speed-up | CPU ms / sample | cores busy |")
    print("|---|---:|---:|---:|---:|---:|")
    busy_local = cpu_local * args.n / 1000 / t_local
    busy_pool = cpu_pool * args.n / 1000 / t_pool
    row = f"| local NativeJudger (threads) | {t_local:.2f} | {args.n / t_local:.0f} | 1.00x"
    print(f"{row} | {cpu_local:.2f} | {busy_local:.2f} |")
    print(
        f"| JudgerPool, {args.workers} workers x 1 CPU | {t_pool:.2f} | {args.n / t_pool:.0f} | "
        f"{t_local / t_pool:.2f}x | {cpu_pool:.2f} | {busy_pool:.2f} |"
    )
    print(
        f"| ceiling: {args.workers} plain processes, no judger | {t_raw:.2f} | {args.n / t_raw:.0f} | "
        f"{t_local / t_raw:.2f}x | {cpu_raw:.2f} | {cpu_raw * args.n / 1000 / t_raw:.2f} |"
    )
    runs_local = ", ".join(f"{t:.2f}" for t in local_times)
    runs_pool = ", ".join(f"{t:.2f}" for t in pool_times)
    print(
        f"\nScorer: {loops} loop iterations = {one * 1000:.2f} CPU ms per sample through the local judger. "
        f"Runs: local {runs_local} s; pool {runs_pool} s; "
        f"plain processes {', '.join(f'{t:.2f}' for t in raw_times)} s. "
        f"Building the pool (Ray start + {args.workers} actors) took {built:.1f} s, not counted. "
        f"1-minute load average before / after: {load_before:.1f} / {os.getloadavg()[0]:.1f}."
    )
    cores = min(args.workers, os.cpu_count() or 1)
    print(
        f"\nThe pool's throughput is {100 * t_raw / t_pool:.0f}% of the plain-process ceiling measured in "
        f"the same run; it spends {100 * (cpu_pool / cpu_raw - 1):.0f}% more CPU per sample than plain "
        f"processes running in parallel, {100 * (cpu_pool / cpu_local - 1):.0f}% more than the local judger "
        "on one core. "
        f"With {cores} cores to itself and no contention, the expected speed-up is about "
        f"{cores} x {cpu_local:.2f} / {cpu_pool:.2f} = {cores * cpu_local / cpu_pool:.2f}x."
    )


if __name__ == "__main__":
    main()
