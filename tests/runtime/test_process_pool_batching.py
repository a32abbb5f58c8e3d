"""Concurrent single judge() calls on worker processes share one pool hand-off."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from judger import RolloutState, Status
from judger.presets.base import ScorerJudger
from judger.runtime.procpool.pool import ProcessPool
from judger.scorers.qa import compute_score

pytestmark = pytest.mark.py310


class CountingPool:
    """A real ProcessPool that records the size of every ``map`` it is given."""

    def __init__(self, pool: ProcessPool) -> None:
        self.pool = pool
        self.maps: list[int] = []

    async def map(self, fn: Any, calls: Sequence[Any], *, timeout: float | None = None) -> list[Any]:
        self.maps.append(len(calls))
        return await self.pool.map(fn, calls, timeout=timeout)


async def test_concurrent_judge_calls_are_one_pool_map() -> None:
    with ProcessPool(1, timeout=30) as real:
        pool = CountingPool(real)
        judger = ScorerJudger("qa", compute_score, execution="process", pool=pool, timeout=30)
        states = [RolloutState(response=str(i), reward_model={"ground_truth": "3"}) for i in range(40)]
        out = await asyncio.gather(*(judger.judge(s) for s in states))
        assert [s.status for s in out].count(Status.FAILED) == 0
        assert [s.reward for s in out] == [compute_score(str(i), "3") for i in range(40)]
        assert pool.maps == [40]  # was 40 maps of 1
        # on_error="raise" keeps each call on its own: one failure must not reach the others
        strict = ScorerJudger("qa", compute_score, execution="process", pool=pool, on_error="raise")
        pool.maps.clear()
        await asyncio.gather(*(strict.judge(s) for s in states[:3]))
        assert pool.maps == [1, 1, 1]


def test_calls_travel_in_chunks_and_a_hang_inside_a_chunk_fails_alone() -> None:
    import math

    from judger.core.errors import JudgeTimeoutError

    with ProcessPool(1, timeout=30) as pool:
        pool.map_sync(math.factorial, [((1,), {})])  # started
        before = pool.stats()["handoffs"]
        out = pool.map_sync(math.factorial, [((i,), {}) for i in range(400)])
        assert out == [math.factorial(i) for i in range(400)]
        assert pool.stats()["handoffs"] - before <= 400 // 8  # was one message per call
        # factorial(10**9) hangs in C in the middle of a chunk: it alone times out; the calls
        # queued behind it in the same chunk run on the replacement worker
        calls = [((i,), {}) for i in range(10)] + [((10**9,), {})] + [((i,), {}) for i in range(20, 30)]
        results = pool.map_sync(math.factorial, calls, timeout=1.0)
        assert isinstance(results[10], JudgeTimeoutError)
        assert results[:10] == [math.factorial(i) for i in range(10)]
        assert results[11:] == [math.factorial(i) for i in range(20, 30)]
        assert pool.stats()["timeouts"] == 1


def test_start_brings_the_workers_up_before_any_call() -> None:
    # `judger score` starts the pool, then reads its file: the workers' start-up overlaps the read
    import time

    with ProcessPool(2, timeout=30) as pool:
        assert pool.worker_pids() == []
        pool.start()
        deadline = time.monotonic() + 60
        while len(pool.worker_pids()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(pool.worker_pids()) == 2
        assert pool.stats()["calls"] == 0
