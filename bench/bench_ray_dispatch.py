"""Ray dispatch overhead: a JudgerPool of 2 against a bare Ray actor call, and against local.

    PYTHONPATH=src .venv/bin/python bench/bench_ray_dispatch.py [--repeat 5]

Everything side by side in one run (ratios; the machine is shared):

1. Trivial handler, per-sample cost: ``JudgerPool.batch_judge`` of 64 and 4096 states on 2 replicas
   vs a bare Ray actor (2 of them, no judger) receiving the same payload dicts in one call each and
   returning one dict per payload.
2. A 2 ms pure-Python handler on 2 workers (1 CPU each): batch of 64 and 4096 vs the local judger.
3. 2,000 concurrent single ``judge()`` calls vs one ``batch_judge`` of the same 2,000 (trivial handler),
   and for reference what 2,000 concurrent callers cost in asyncio alone (a task and a future each).
   Then the same comparison inside an agent loop, where a task per rollout exists either way: 2,000
   tasks that each await ``judge()`` as they finish, against the same 2,000 tasks handing their
   states to one ``batch_judge``. That row prices only what judging each sample alone adds. The
   script also prints how many full garbage collections landed on each side of the first row.

Times are medians of ``--repeat`` runs, the two sides of each row alternating run by run. ``--no-gc``
runs the concurrent rows with the garbage collector off.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import time
from typing import Any

import ray

from bench_ray_pool import calibrate
from judger import CPUResourcesConfig, JudgerConfig, RolloutState


def trivial(response: str, label: Any, extra_info: dict[str, Any]) -> dict[str, Any]:
    return {"score": float(response == label)}


def burn(response: str, label: Any, extra_info: dict[str, Any]) -> dict[str, Any]:
    # defined here, not imported: the actors unpickle it by value from __main__, and they cannot
    # import bench_ray_pool (bench/ is not on their path)
    acc = 0
    for i in range(extra_info["loops"]):
        acc = (acc * 31 + i) % 1_000_003
    return {"score": float(response == label), "acc": acc}


@ray.remote(num_cpus=0.5)
class Bare:
    """The floor: a Ray actor that scores payload dicts with the same trivial function, no judger."""

    async def run(self, payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [trivial(p["response"], p["label"], {}) for p in payloads]


def states(n: int) -> list[RolloutState]:
    return [RolloutState(response=str(i % 5), reward_model={"ground_truth": "3"}) for i in range(n)]


def paired_times(first: Any, second: Any, repeat: int) -> tuple[float, float]:
    """Medians of ``first()`` and ``second()``, run alternately: this VM's speed drifts by more than
    the differences measured, so the two sides must share every stretch of it."""
    a: list[float] = []
    b: list[float] = []
    for _ in range(repeat):
        for fn, times in ((first, a), (second, b)):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    return statistics.median(a), statistics.median(b)


class FullCollections:
    """Counts the collector's full (generation 2) passes while a labelled side runs: they cost
    tens of milliseconds in a process holding Ray's ~100k objects, and land on whichever side's
    allocations cross the threshold."""

    def __init__(self) -> None:
        self.current: str | None = None
        self.counts: dict[str, int] = {}
        gc.callbacks.append(self._seen)

    def _seen(self, phase: str, info: dict[str, int]) -> None:
        if phase == "stop" and info["generation"] == 2 and self.current is not None:
            self.counts[self.current] = self.counts.get(self.current, 0) + 1

    def labelled(self, label: str, fn: Any) -> Any:
        def run() -> None:
            self.current = label
            try:
                fn()
            finally:
                self.current = None

        return run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--ms", type=float, default=2.0)
    ap.add_argument(
        "--no-gc",
        action="store_true",
        help="turn the garbage collector off for the concurrent rows, to see what they cost without it",
    )
    args = ap.parse_args()
    ray.init(num_cpus=max(2, os.cpu_count() or 2), include_dashboard=False, log_to_driver=False)
    load = os.getloadavg()[0]
    two = CPUResourcesConfig(num_workers=2, num_cpus_per_worker=0.5)
    pool = JudgerConfig(
        judger_name="trivial", reward_handler=trivial, cpu_resources=two, execution="thread"
    ).build()
    bare = [Bare.remote(), Bare.remote()]
    ray.get([b.run.remote([]) for b in bare])

    def run_pool(n: int) -> None:
        out = asyncio.run(pool.batch_judge(states(n)))
        assert all(s.reward is not None for s in out)

    def run_bare(n: int) -> None:
        payloads = [{"response": s.response, "label": "3"} for s in states(n)]
        half = -(-n // 2)
        ray.get([bare[0].run.remote(payloads[:half]), bare[1].run.remote(payloads[half:])])

    run_pool(256)
    print("### Ray dispatch\n")
    print("| case | judger | floor | ratio | target |")
    print("|---|---:|---:|---:|---|")
    for n, target in ((64, "<= 2x"), (4096, "<= 1.5x")):
        t_pool, t_bare = paired_times(lambda n=n: run_pool(n), lambda n=n: run_bare(n), args.repeat)
        print(
            f"| trivial handler, batch {n}: per sample, pool of 2 vs bare actor call | "
            f"{t_pool / n * 1e6:.1f} us | {t_bare / n * 1e6:.1f} us | {t_pool / t_bare:.2f}x | {target} |"
        )

    async def actor_calls() -> int:
        return sum([(await r.actor_stats())["calls"] for r in pool.replicas])

    async def calls_for(n: int) -> int:
        before = await actor_calls()
        await pool.batch_judge(states(n))
        return await actor_calls() - before

    print(f"\nRay calls for one more batch of 4096 (trivial handler): {asyncio.run(calls_for(4096))}\n")

    # concurrent singles vs one batch
    async def singles(n: int) -> None:
        out = await asyncio.gather(*(pool.judge(s) for s in states(n)))
        assert all(s.reward is not None for s in out)

    # what any concurrent caller pays before judging anything: a task per call (the gather) and
    # a future per call to wait on, resolved from one batch
    async def waiters(n: int) -> None:
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in range(n)]

        async def wait(s: RolloutState, future: asyncio.Future[None]) -> RolloutState:
            await future
            return s

        tasks = asyncio.gather(*(wait(s, f) for s, f in zip(states(n), futures)))
        await asyncio.sleep(0)
        for future in futures:
            future.set_result(None)
        await tasks

    full = FullCollections()
    if args.no_gc:
        gc.collect()
        gc.disable()
    t_single, t_batch = paired_times(
        full.labelled("singles", lambda: asyncio.run(singles(2000))),
        full.labelled("batch", lambda: run_pool(2000)),
        args.repeat,
    )
    print(
        f"| 2,000 concurrent judge() vs one batch_judge of 2,000 (throughput) | "
        f"{2000 / t_single:.0f} /s | {2000 / t_batch:.0f} /s | {t_batch / t_single:.2f}x | >= 0.5x |"
    )
    t_wait, t_batch = paired_times(lambda: asyncio.run(waiters(2000)), lambda: run_pool(2000), args.repeat)
    print(
        f"| (reference) 2,000 concurrent coroutines that only await a future each, vs the same "
        f"batch_judge | {2000 / t_wait:.0f} /s | {2000 / t_batch:.0f} /s | {t_batch / t_wait:.2f}x | - |"
    )

    # an agent loop: a task per rollout on both sides; one judges as it finishes, the other collects
    async def rollout(s: RolloutState) -> RolloutState:
        await asyncio.sleep(0)  # the rollout's last step (generation, tool call) before judging
        return s

    async def judged_rollout(s: RolloutState) -> RolloutState:
        return await pool.judge(await rollout(s))

    async def agents_judging(n: int) -> None:
        out = await asyncio.gather(*(judged_rollout(s) for s in states(n)))
        assert all(s.reward is not None for s in out)

    async def agents_then_batch(n: int) -> None:
        out = await pool.batch_judge(await asyncio.gather(*(rollout(s) for s in states(n))))
        assert all(s.reward is not None for s in out)

    t_agents, t_collect = paired_times(
        lambda: asyncio.run(agents_judging(2000)), lambda: asyncio.run(agents_then_batch(2000)), args.repeat
    )
    print(
        f"| agent loop: 2,000 rollout tasks each awaiting judge() vs the same tasks, then one "
        f"batch_judge (throughput) | {2000 / t_agents:.0f} /s | {2000 / t_collect:.0f} /s | "
        f"{t_collect / t_agents:.2f}x | - |"
    )
    gc.enable()
    pool.close()
    for b in bare:
        ray.kill(b)

    loops = calibrate(args.ms)
    cfg = JudgerConfig(
        judger_name="burn", reward_handler=burn, extra_info={"loops": loops}, execution="thread"
    )
    local = cfg.build()
    one = CPUResourcesConfig(num_workers=2, num_cpus_per_worker=1)
    burn_pool = cfg.model_copy(update={"cpu_resources": one}).build()
    asyncio.run(burn_pool.batch_judge(states(64)))
    for n, target in ((64, ">= 1.5x"), (4096, ">= 1.8x")):
        rep = args.repeat if n <= 64 else max(1, args.repeat // 2)
        t_local, t_burn = paired_times(
            lambda n=n: asyncio.run(local.batch_judge(states(n))),
            lambda n=n: asyncio.run(burn_pool.batch_judge(states(n))),
            rep,
        )
        print(
            f"| {args.ms:g} ms handler, batch {n}: pool of 2 x 1 CPU vs local (speed-up) | "
            f"{t_burn:.3f} s | {t_local:.3f} s | {t_local / t_burn:.2f}x | {target} |"
        )
    burn_pool.close()
    local.close()
    after = os.getloadavg()[0]
    print(f"\n{os.cpu_count()} CPUs; 1-minute load average before / after: {load:.1f} / {after:.1f}.")
    print(
        f"Full garbage collections during the 2,000-singles row's {args.repeat} + {args.repeat} runs: "
        f"singles {full.counts.get('singles', 0)}, batch {full.counts.get('batch', 0)}."
    )


if __name__ == "__main__":
    main()
