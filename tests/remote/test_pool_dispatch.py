"""Pool dispatch: least-loaded under a slow replica, bounded in-flight payloads, status, shutdown."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pytest

from judger import CPUResourceManager, JudgerPool, RemoteJudger, RolloutState
from judger.remote.dispatch import _QUICK_BATCH_S, Dispatcher, Replica
from judger.testing.ray import SleepJudgerConfig, small_resources

pytestmark = pytest.mark.ray


def sleep_replica(delay: float, i: int) -> RemoteJudger:
    return RemoteJudger(
        SleepJudgerConfig(delay=delay), num_cpus=0.1, memory=64 * 1024**2, replica_name=f"r{i}"
    )


def blank_states(n: int) -> list[RolloutState]:
    return [RolloutState(message=[], response=str(i)) for i in range(n)]


async def test_least_loaded_dispatch_sends_less_work_to_a_slow_replica(ray_cluster: Any) -> None:
    # the slow replica's chunk 3 s: far above what a chunk costs the fast one even on a machine
    # so busy that a Ray call takes a second (at 1 s a chunk, a loaded run split 103/97)
    slow, fast = sleep_replica(0.3, 0), sleep_replica(0.0, 1)
    pool = JudgerPool([slow, fast], chunk_size=10, max_in_flight=10)
    try:
        out = await pool.batch_judge(blank_states(200))
        assert all(s.reward and s.reward["score"] == 1.0 for s in out)
        by_pid = Counter(s.reward["pid"] for s in out)
        slow_pid = (await slow.actor_stats())["pid"]
        # round-robin would split 100/100. The slow replica takes the first chunk (ties go to
        # replica 0) and holds it 3 s; it gets another only while the fast one's 19 calls take
        # longer than that. A third leaves room for a loaded machine slowing the fast one too
        assert by_pid[slow_pid] <= 66, by_pid
        assert sum(by_pid.values()) == 200

        # single judge() calls from many concurrent callers are balanced the same way
        states = blank_states(80)
        await asyncio.gather(*(pool.judge(s) for s in states))
        singles = Counter(s.reward["pid"] for s in states)
        assert singles[slow_pid] < 0.45 * singles.total(), singles  # round-robin: a half
    finally:
        await pool.aclose()


async def test_in_flight_payloads_per_replica_are_bounded(ray_cluster: Any) -> None:
    pool = JudgerPool([sleep_replica(0.01, 0), sleep_replica(0.01, 1)], chunk_size=4, max_in_flight=8)
    seen: list[dict[str, int]] = []
    done = asyncio.Event()

    async def watch() -> None:
        while not done.is_set():
            seen.append(pool.get_worker_status())
            await asyncio.sleep(0.005)

    try:
        watcher = asyncio.create_task(watch())
        # three callers at once: 3 x 64 payloads contend for 2 x 8 slots
        batches = await asyncio.gather(*(pool.batch_judge(blank_states(64)) for _ in range(3)))
        done.set()
        await watcher
        outputs = [s.reward for batch in batches for s in batch]
        assert len(outputs) == 192 and all(r and r["score"] == 1.0 for r in outputs)
        # measured inside the actors: never more than 8 payloads held by one process
        assert max(r["peak"] for r in outputs) <= 8
        assert max(max(status.values()) for status in seen) <= 8
        assert any(sum(status.values()) >= 12 for status in seen), "the pool never got busy"
        assert pool.get_worker_status() == {"sleepy[0]": 0, "sleepy[1]": 0}
    finally:
        await pool.aclose()


async def test_closing_kills_actors_and_releases_the_registration(
    ray_cluster: Any, resource_manager: Any
) -> None:
    import ray
    from ray.exceptions import RayActorError

    cfg = SleepJudgerConfig(judger_name="closing", cpu_resources=small_resources(2))
    pool = cfg.build()
    assert isinstance(pool, JudgerPool)
    assert pool.resource_name == "judger:closing"
    assert resource_manager.registrations()["judger:closing"] == cfg.cpu_resources
    second = cfg.model_copy(update={"cpu_resources": small_resources(1)}).build()
    assert second.resource_name == "judger:closing#2"
    async with second:
        assert (await second.judge(blank_states(1)[0])).reward["score"] == 1.0
    assert "judger:closing#2" not in resource_manager.registrations()

    handles = [r.actor for r in pool.replicas]
    await pool.aclose()
    await pool.aclose()  # twice is fine
    assert "judger:closing" not in CPUResourceManager.instance().registrations()
    # ray.kill is asynchronous: a call sent right after it may still be served, so poll until dead
    for handle in handles:
        deadline = time.monotonic() + 30
        while True:
            try:
                ray.get(handle.stats.remote(), timeout=30)
            except RayActorError:
                break
            assert time.monotonic() < deadline, "actor still alive 30 s after close"
            await asyncio.sleep(0.1)
    with pytest.raises(RuntimeError, match="closed"):
        await pool.batch_judge(blank_states(3))


def test_sync_context_manager_closes(ray_cluster: Any, resource_manager: Any) -> None:
    cfg = SleepJudgerConfig(judger_name="sync_closing", cpu_resources=small_resources(1))
    with cfg.build() as judger:
        states = asyncio.run(judger.batch_judge(blank_states(5)))
        assert [s.reward["score"] for s in states] == [1.0] * 5
        assert "judger:sync_closing" in resource_manager.registrations()
    assert judger.closed


def test_pool_rejects_empty_or_foreign_replicas() -> None:
    with pytest.raises(ValueError, match="at least one replica"):
        JudgerPool([])
    with pytest.raises(TypeError, match="RemoteJudger"):
        JudgerPool([SleepJudgerConfig().build()])  # type: ignore[list-item]


async def _calls(pool: JudgerPool) -> int:
    return sum([(await r.actor_stats())["calls"] for r in pool.replicas])


async def test_few_large_calls_and_concurrent_judge_calls_travel_together(ray_cluster: Any) -> None:
    # 64 payloads on 2 replicas were about 21 Ray calls (chunks sized from 4 senders);
    # 200 concurrent judge() calls were 200 calls
    pool = JudgerPool([sleep_replica(0.0, 0), sleep_replica(0.0, 1)])
    try:
        before = await _calls(pool)
        out = await pool.batch_judge(blank_states(64))
        assert all(s.reward and s.reward["score"] == 1.0 for s in out)
        assert await _calls(pool) - before == 2
        before = await _calls(pool)
        singles = await asyncio.gather(*(pool.judge(s) for s in blank_states(200)))
        assert all(s.reward and s.reward["score"] == 1.0 for s in singles)
        assert len({s.reward["pid"] for s in singles}) == 2  # spread over both replicas
        assert await _calls(pool) - before <= 4
    finally:
        await pool.aclose()


async def test_a_quick_large_batch_is_one_call_per_replica_and_a_slow_one_is_pipelined(
    ray_cluster: Any,
) -> None:
    # a trivial scorer's 4096 payloads were 12 Ray calls (guided chunks), against 2 for a bare actor
    quick = JudgerPool([sleep_replica(0.0, 0), sleep_replica(0.0, 1)])
    slow = JudgerPool([sleep_replica(0.002, 0), sleep_replica(0.002, 1)], max_in_flight=256)
    try:
        assert quick.dispatcher.cost_per_payload is None
        await quick.batch_judge(blank_states(2048))  # measures the cost per payload
        cost = quick.dispatcher.cost_per_payload
        assert cost is not None and cost > 0
        before = await _calls(quick)
        out = await quick.batch_judge(blank_states(1024))
        assert all(s.reward and s.reward["score"] == 1.0 for s in out)
        if cost * 512 < _QUICK_BATCH_S:  # measured quick (on a loaded machine it may not be)
            assert await _calls(quick) - before == 2

        await slow.batch_judge(blank_states(16))
        before = await _calls(slow)
        out = await slow.batch_judge(blank_states(600))  # at least 0.6 s of work per replica
        assert all(s.reward and s.reward["score"] == 1.0 for s in out)
        assert await _calls(slow) - before > 4  # guided chunks: a lost actor strands one of them
    finally:
        await quick.aclose()
        await slow.aclose()


def test_chunk_sizes_follow_the_batch_and_the_measured_cost() -> None:
    d = Dispatcher("t", [Replica(None, "a"), Replica(None, "b")], call_timeout=lambda n: 1.0)
    assert d.chunk_size_for(64, 64, 2) == 32  # small: split evenly
    assert d.chunk_size_for(4096, 4096, 2) == 1024  # cost unknown: guided, two in flight each
    d.cost_per_payload = 5e-6  # 2048 payloads a replica: 10 ms of work
    assert d.chunk_size_for(4096, 4096, 2) == 2048
    assert d.chunk_size_for(100_000, 100_000, 2) == 1024  # one call would pass max_in_flight
    d.cost_per_payload = 2e-3  # 4 s a replica: guided, shrinking towards the end
    assert d.chunk_size_for(4096, 4096, 2) == 1024 and d.chunk_size_for(600, 4096, 2) == 150
    assert d.chunk_size_for(100, 4096, 2) == 128
    capped = Dispatcher("t", [Replica(None, "a")], call_timeout=lambda n: 1.0, chunk_size=100)
    capped.cost_per_payload = 1e-9
    assert capped.chunk_size_for(4096, 4096, 1) == 100  # a chunk_size given caps every call


async def test_a_second_cancel_while_a_call_gives_back_its_slot_keeps_no_slot() -> None:
    # a sample's deadline cancels its call; while the call waits for the lock to give its slot back
    # (other callers are taking turns on it, as in a burst), its caller cancels it again: the slot
    # must still come back and the caller waiting for it must hear so, or the pool shrinks for good
    replica = Replica(None, "a")
    d = Dispatcher("t", [replica], call_timeout=lambda n: 1.0, max_in_flight=1)
    answer = asyncio.Event()

    async def call(replica: Replica, method: str, arg: Any, size: int, timeout: float | None = None) -> str:
        await answer.wait()
        return f"scored {arg}"

    d._call = call  # type: ignore[method-assign]
    first = asyncio.create_task(d.run_one("first"))
    await asyncio.sleep(0)
    assert replica.in_flight == 1
    waiting = asyncio.create_task(d.run_one("second"))  # waits for the one slot
    await asyncio.sleep(0)
    cond = d._condition()
    await cond.acquire()  # someone else's turn on the lock
    first.cancel()
    await asyncio.sleep(0)  # the first call's release now waits for the lock
    assert not first.done()
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    cond.release()
    answer.set()
    assert await asyncio.wait_for(waiting, 5) == "scored second"
    assert replica.in_flight == 0
