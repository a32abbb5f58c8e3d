"""`judger score --ray`: what a block of rows costs to send to an actor and back, per row.

    PYTHONPATH=src .venv/bin/python bench/bench_ray_score.py [--gsm8k-rows 100000] [--math-rows 20000]
        [--rounds 3]

On a two-node cluster on this machine (``judger.testing.ray.local_cluster``, one CPU a node, one
actor a node), the driver of this process scores a file with ``judger score --ray``'s own parts
(:mod:`judger.cli.ray_score`: the blocks, the JudgerPool of BlockActors, the merge in file order),
and, in the same rounds, scores the same blocks in this process with the same function the actors
run (:func:`judger.cli.shards.score_block`: read, judge, tally, encode), so that the difference is
what Ray adds. Per row, medians of the rounds:

- ``driver CPU``: this process's CPU (every thread: reading the file, Ray's serialisation and
  transfer, taking the results, merging the tallies) while the file is scored on Ray;
- ``actor CPU``: the actors' own CPU (``JudgerActor.stats()["cpu_s"]`` before and after), beside
  ``local CPU``, the same blocks scored in this process; worker processes that grade (MATH's pool)
  are outside both;
- ``overhead``: driver CPU + (actor CPU - local CPU): the CPU Ray adds per row, all processes;
- ``bytes``: per row, the block's bytes out and the pickled result back;
- ``dispatch``: the round trip of a call carrying an empty block (the fixed cost of a block, from
  the driver to an actor and back), median of 50, and the driver's CPU per such call.

The throughput model these figures feed is in docs/benchmarks.md ("`judger score --ray`").
"""

from __future__ import annotations

import argparse
import asyncio
import pickle
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_cli_score import gsm8k_rows, math_rows
from judger.cli import ray_score, shards
from judger.cli.judging import default_config
from judger.cli.shards import BlockOptions, score_block
from judger.cli.tally import Tally
from judger.judgers.config import build_judger
from judger.testing.ray import local_cluster


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def actors_cpu(running: Any) -> float:
    import ray

    stats = ray.get([r.endpoint.handle.stats.remote() for r in running.pool.replicas])
    return sum(s["cpu_s"] for s in stats)


def on_ray(running: Any, path: Path) -> dict[str, float]:
    tally, written, back = Tally(0), [0], [0]

    def take(block: Any) -> None:
        tally.merge(block.tally)
        written[0] += len(block.output)
        back[0] += len(pickle.dumps(block))

    actors_before, cpu_before, start = actors_cpu(running), cpu(), time.perf_counter()
    asyncio.run(ray_score.score_file(running, str(path), take, lambda n: None))
    wall, driver = time.perf_counter() - start, cpu() - cpu_before
    return {"wall": wall, "driver": driver, "actors": actors_cpu(running) - actors_before, "back": back[0]}


def locally(judger: Any, options: BlockOptions, path: Path, block: int) -> dict[str, float]:
    async def run() -> None:
        tally = Tally(0)
        for number, data in shards.blocks(str(path), block):
            tally.merge((await score_block(judger, options, number, data)).tally)

    before, start = cpu(), time.perf_counter()
    asyncio.run(run())
    return {"wall": time.perf_counter() - start, "cpu": cpu() - before}


def dispatch_ms(running: Any, calls: int = 50) -> tuple[float, float]:
    """Round trip of a call with an empty block (median, ms) and this process's CPU per call (ms)."""

    async def one() -> float:
        start = time.perf_counter()
        await running.score(1, b"")
        return time.perf_counter() - start

    async def all_calls() -> list[float]:
        return [await one() for _ in range(calls)]

    before = cpu()
    times = asyncio.run(all_calls())
    return 1000 * statistics.median(times), 1000 * (cpu() - before) / calls


def measure(kind: str, rows: int, rounds: int, address: str, tmp: Path) -> None:
    path = tmp / f"{kind}.jsonl"
    (gsm8k_rows if kind == "gsm8k" else math_rows)(rows, path)
    options = BlockOptions(str(path), 0, True, True, 256)
    cfg = default_config()
    running = ray_score.start(cfg, options, address)
    judger = build_judger(cfg)
    try:
        on_ray(running, path)  # warm: the actors' first blocks, the page cache
        locally(judger, options, path, running.block_size)  # and the same here (imports, routes)
        ray_runs, local_runs = [], []
        for round_ in range(rounds):
            sides = [lambda: ray_runs.append(on_ray(running, path))]
            sides.append(lambda: local_runs.append(locally(judger, options, path, running.block_size)))
            for side in sides if round_ % 2 == 0 else reversed(sides):
                side()
        dispatch = dispatch_ms(running)
    finally:
        running.close()
        judger.close()
    med = {k: statistics.median(r[k] for r in ray_runs) for k in ray_runs[0]}
    local = {k: statistics.median(r[k] for r in local_runs) for k in local_runs[0]}
    us = 1e6 / rows
    size = path.stat().st_size
    print(
        f"{kind}: {rows} rows, {size / 1e6:.0f} MB, blocks of {running.block_size >> 10} KiB "
        f"({rows * running.block_size // size} rows), {running.actors} actors on 2 nodes, {rounds} rounds"
    )
    print(f"  driver CPU    {med['driver'] * us:8.1f} us/row")
    print(f"  actor CPU     {med['actors'] * us:8.1f} us/row   local CPU {local['cpu'] * us:8.1f} us/row")
    overhead = (med["driver"] + med["actors"] - local["cpu"]) * us
    print(f"  overhead      {overhead:8.1f} us/row (CPU, all processes)")
    print(f"  bytes         {size / rows:8.0f} out, {med['back'] / rows:.0f} back per row")
    print(f"  wall          {med['wall'] * us:8.1f} us/row on Ray, {local['wall'] * us:.1f} in this process")
    trip, driver_ms = dispatch
    print(
        f"  dispatch      {trip:8.2f} ms per block round trip (an empty block), {driver_ms:.2f} ms driver CPU"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gsm8k-rows", type=int, default=100_000)
    parser.add_argument("--math-rows", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with local_cluster(nodes=2, cpus_per_node=1) as cluster, tempfile.TemporaryDirectory() as tmp:
        for kind, rows in (("gsm8k", args.gsm8k_rows), ("math", args.math_rows)):
            if rows:
                measure(kind, rows, args.rounds, cluster.address, Path(tmp))


if __name__ == "__main__":
    main()
