"""A sample that overruns its deadline on Ray fails alone, never a neighbour."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from judger import CPUResourcesConfig, JudgerConfig, RolloutState, Status

pytestmark = pytest.mark.ray


def _states(n: int, hung: int) -> list[RolloutState]:
    return [
        RolloutState(
            response="1",
            reward_model={"ground_truth": "1"},
            extra_fields={"extra_info": {"sleep": 60.0 if i == hung else 0.0}},
        )
        for i in range(n)
    ]


@pytest.mark.slow
async def test_a_hung_sample_fails_only_itself_on_a_pool_of_half_cpu_workers(ray_cluster: Any) -> None:
    # the exact case of the issue: 2 workers of 0.5 CPU (one handler thread each), a 3 s deadline,
    # one response that sleeps 60 s and 200 that return at once. Index 68 used to fail too: its
    # chunk queued behind the hung call in the same actor and its deadline ran while it waited.
    cfg = JudgerConfig(
        judger_name="sleepy",
        reward_handler="judger.testing.handlers:sleepy",
        timeout=3.0,
        cpu_resources=CPUResourcesConfig(num_workers=2, num_cpus_per_worker=0.5),
    )
    judger = cfg.build()
    try:
        out = await judger.batch_judge(_states(201, hung=0))
        failed = [i for i, s in enumerate(out) if s.status == Status.FAILED]
        assert failed == [0], {i: out[i].error_msg for i in failed[:3]}  # why, when more fail
        assert "did not finish within 3 s" in (out[0].error_msg or "")
        assert all(s.reward["score"] == 1.0 for s in out[1:])
        # the single-sample path, concurrently with the hung one: again only the hung one fails
        states = _states(12, hung=5)
        singles = await asyncio.gather(*(judger.judge(s) for s in states))
        assert [i for i, s in enumerate(singles) if s.status == Status.FAILED] == [5]
    finally:
        await judger.aclose()
