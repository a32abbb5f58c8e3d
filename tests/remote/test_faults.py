"""Actors that die or hang: Ray restarts them, payloads are retried elsewhere, nothing is lost."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from judger import JudgerPool, RemoteJudger, Status
from judger.testing.ray import FaultyJudgerConfig, SleepJudgerConfig, id_states

pytestmark = pytest.mark.ray


def faulty_pool(tmp_path: Path, n_workers: int, **fields: Any) -> tuple[JudgerPool, FaultyJudgerConfig]:
    options = {
        k: fields.pop(k)
        for k in ("max_retries", "call_timeout", "max_in_flight", "chunk_size")
        if k in fields
    }
    cfg = FaultyJudgerConfig(flag_dir=str(tmp_path), **fields)
    replicas = [
        RemoteJudger(cfg, num_cpus=0.1, memory=64 * 1024**2, replica_name=f"faulty[{i}]")
        for i in range(n_workers)
    ]
    return JudgerPool(replicas, **options), cfg


async def test_actor_killed_mid_batch_every_sample_scored_once(tmp_path: Path, ray_cluster: Any) -> None:
    # small chunks (the dispatcher's old defaults), so that the batch outlasts the
    # killed actor's restart and the restarted actor takes part of it
    pool, _ = faulty_pool(
        tmp_path, 2, fault="kill", fault_ids=[613], once=True, delay=0.001, chunk_size=64, max_in_flight=128
    )
    try:
        states = id_states(1000)
        out = await pool.batch_judge(states)
        assert (tmp_path / "faulted-613").exists(), "the fault was never triggered"
        assert [s.status for s in out].count(Status.FAILED) == 0
        assert [s.reward["score"] for s in out] == [float(i) for i in range(1000)]
        assert len({id(s) for s in out}) == 1000
        stats = pool.worker_stats()
        assert sum(s["lost_calls"] for s in stats.values()) >= 1
        assert sum(s["completed"] for s in stats.values()) >= 1000
        # Ray restarted the killed actor: both replicas answer again, from new processes or old
        pids = {s.reward["pid"] for s in out}
        after = await pool.batch_judge(id_states(40))
        assert all(s.status != Status.FAILED for s in after)
        assert len(pids) >= 2
        assert pool.get_worker_status() == {"faulty[0]": 0, "faulty[1]": 0}
    finally:
        await pool.aclose()


async def test_hung_actor_hits_the_deadline_and_the_batch_completes(tmp_path: Path, ray_cluster: Any) -> None:
    # sample 7 blocks its actor's event loop the first time: only the driver's deadline can end it
    # the call deadline 5 s: a healthy chunk normally takes milliseconds, but under a CPU hog on
    # both cores and four test workers one took over 2 s and failed its sample (the stress run)
    pool, _ = faulty_pool(tmp_path, 2, fault="hang", fault_ids=[7], once=True, call_timeout=5.0)
    try:
        started = time.monotonic()
        out = await pool.batch_judge(id_states(40))
        assert (tmp_path / "faulted-7").exists(), "the fault was never triggered"
        assert [s.error_msg for s in out if s.status == Status.FAILED] == []
        assert [s.reward["score"] for s in out] == [float(i) for i in range(40)]
        stats = pool.worker_stats().values()
        assert sum(s["hung_calls"] for s in stats) >= 1 and sum(s["kills"] for s in stats) >= 1
        assert 5.0 <= time.monotonic() - started < 60
    finally:
        await pool.aclose()


async def test_a_slow_call_whose_actor_still_answers_is_waited_on_not_killed(ray_cluster: Any) -> None:
    # a call deadline of 1 s and a judger that awaits 2.5 s: its event loop stays free, as on a
    # machine under load or in a restarted actor starting its worker processes, so the call is
    # slow, not hung. It completes on its first actor, which is never killed.
    slow = RemoteJudger(SleepJudgerConfig(delay=2.5), num_cpus=0.1, memory=64 * 1024**2)
    pool = JudgerPool([slow], call_timeout=1.0, max_retries=0)
    try:
        await slow.actor_stats()  # started: the 1 s is the call's alone, not the actor's start too
        (out,) = await pool.batch_judge(id_states(1))
        assert out.status != Status.FAILED, out.error_msg
        (stats,) = pool.worker_stats().values()
        assert stats["kills"] == 0 and stats["completed"] == 1
        # ...for a few deadlines at most: a loop that answers forever does not hold a call forever
        slower = RemoteJudger(SleepJudgerConfig(delay=120.0), num_cpus=0.1, memory=64 * 1024**2)
        bounded = JudgerPool([slower], call_timeout=1.0, max_retries=0)
        try:
            await slower.actor_stats()
            started = time.monotonic()
            (late,) = await bounded.batch_judge(id_states(1))
            assert late.status == Status.FAILED and "its event loop answered for" in (late.error_msg or "")
            assert time.monotonic() - started < 60
        finally:
            await bounded.aclose()
    finally:
        await pool.aclose()


@pytest.mark.slow
async def test_always_hanging_payload_fails_as_timeout_alone(tmp_path: Path, ray_cluster: Any) -> None:
    # one replica, so every payload shares the actor with the hanging one until its last attempt,
    # which runs alone: only sample 23 fails
    pool, _ = faulty_pool(
        tmp_path, 1, fault="hang", fault_ids=[23], once=False, call_timeout=2.0, max_retries=1
    )
    try:
        out = await pool.batch_judge(id_states(30))
        failed = [i for i, s in enumerate(out) if s.status == Status.FAILED]
        assert failed == [23]
        assert out[23].extra_fields["judge_failure"] == {"judger": "faulty", "kind": "timeout"}
        assert "did not finish within 2 s" in out[23].error_msg
        assert all(s.reward["score"] == float(i) for i, s in enumerate(out) if i != 23)
    finally:
        await pool.aclose()


@pytest.mark.slow
async def test_poison_payload_fails_alone_after_bounded_retries(tmp_path: Path, ray_cluster: Any) -> None:
    pool, _ = faulty_pool(tmp_path, 2, fault="kill", fault_ids=[3], once=False, max_retries=2)
    try:
        out = await pool.batch_judge(id_states(24))
        failed = [i for i, s in enumerate(out) if s.status == Status.FAILED]
        assert failed == [3]
        assert out[3].error_msg.startswith("ReplicaLostError: judger 'faulty': the Ray actor running this")
        assert "3 attempt(s)" in out[3].error_msg
        assert all(s.reward["score"] == float(i) for i, s in enumerate(out) if i != 3)
        # the single-sample path applies the same budget and reports the same way
        lone = await pool.judge(id_states(4)[3])
        assert lone.status == Status.FAILED and lone.error_msg.startswith("ReplicaLostError")
    finally:
        await pool.aclose()
