"""JudgerActor's methods (also usable without Ray) and the XTuner-style judge_payload on a remote."""

from __future__ import annotations

import os
from typing import Any

import pytest

from judger import JudgerActor, JudgerConfig
from judger.core.failure import JudgeFailure
from judger.testing.ray import fail_on_seven, small_resources


async def test_actor_runs_payloads_with_per_sample_failures_and_counts_what_it_received() -> None:
    actor = JudgerActor(JudgerConfig(judger_name="sevens", reward_handler=fail_on_seven))
    results = await actor.run_payloads([{"response": str(i), "label": "3"} for i in range(9)])
    assert results[3] == {"score": 1.0} and results[0] == {"score": 0.0}
    assert results[7] == JudgeFailure("sevens", "error", "ValueError: seven is not allowed")
    assert await actor.run_payload({"response": "3", "label": "3"}) == {"score": 1.0}
    with pytest.raises(ValueError, match="seven"):
        await actor.run_payload({"response": "7", "label": "3"})
    assert await actor.judge_payload([{"response": "1", "label": "1"}]) == [{"score": 1.0}]
    stats = await actor.stats()
    assert (stats["calls"], stats["payloads"], stats["keys_seen"]) == (4, 12, ["label", "response"])
    assert stats["pid"] == os.getpid() and stats["judger_name"] == "sevens"
    await actor.aclose()


@pytest.mark.ray
async def test_remote_judge_payload_and_status_shapes(ray_cluster: Any) -> None:
    cfg = JudgerConfig(judger_name="sevens", reward_handler=fail_on_seven, cpu_resources=small_resources(1))
    async with cfg.build() as remote:
        assert await remote.judge_payload({"response": "3", "label": "3"}) == {"score": 1.0}
        assert await remote.judge_payload([{"response": "3", "label": "3"}] * 3) == [{"score": 1.0}] * 3
        with pytest.raises(ValueError, match="seven"):
            await remote.judge_payload({"response": "7", "label": "3"})
        assert remote.get_worker_status() == {"sevens[0]": 0}
        (stats,) = remote.worker_stats().values()
        assert stats["state"] == "alive" and stats["completed"] == 5 and stats["lost_calls"] == 0


def test_actor_threads_follow_the_reserved_cpus() -> None:
    from judger.remote.build import _actor_config

    cfg = JudgerConfig(
        judger_name="t", reward_handler="judger.testing.handlers:exact_match", execution="thread"
    )
    assert _actor_config(cfg, cfg.build_local(), 1).num_threads == 1
    assert _actor_config(cfg, cfg.build_local(), 2.5).num_threads == 3
    explicit = cfg.model_copy(update={"num_threads": 8})
    assert _actor_config(explicit, explicit.build_local(), 1).num_threads == 8
    url = JudgerConfig(judger_name="u", reward_handler="http://127.0.0.1:9/reward")
    assert _actor_config(url, url.build_local(), 1).num_threads is None


@pytest.mark.ray
async def test_an_actors_worker_processes_follow_its_reserved_cpus(ray_cluster: Any) -> None:
    # a handler run in killable worker processes (the default for one a worker can load): as many
    # as the actor reserved CPUs, not one per core of the node for each actor
    cfg = JudgerConfig(
        judger_name="pids",
        reward_handler="judger.testing.handlers:report_pid",
        cpu_resources=small_resources(1),
    )
    async with cfg.build() as remote:
        out = await remote.judge_payload({"response": "1", "label": "1"})
        stats = await remote.actor_stats()
    assert out["pid"] != stats["pid"]  # scored in a worker process of the actor
    assert stats["pool_workers"] == 1
