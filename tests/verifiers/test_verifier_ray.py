"""An LLM verifier config built onto a Ray actor (cpu_resources): the actor reaches the grader."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from judger import CompassVerifierV2Config, CPUResourcesConfig, RolloutState
from judger.testing.fake_openai import FakeOpenAI


@pytest.mark.slow
@pytest.mark.ray
async def test_verifier_on_a_ray_actor(
    ray_cluster: object, fake_grader: tuple[FakeOpenAI, str], make_state: Callable[..., RolloutState]
) -> None:
    fake, url = fake_grader
    cfg = CompassVerifierV2Config(
        hosts=[url], cpu_resources=CPUResourcesConfig(num_workers=1, num_cpus_per_worker=0.5)
    )
    async with cfg.build() as judger:
        assert type(judger).__name__ == "RemoteJudger"
        # the driver answers for the grader's lowest verdict (what a trainer gives a failure)
        assert judger.lowest_score_for(make_state("x", "2")) == -1.0
        judged = await judger.batch_judge([make_state(f"\\boxed{{{i}}}", "2") for i in range(6)])
    assert [s.reward["verdict"] for s in judged if s.reward] == [
        "correct" if i == 2 else "incorrect" for i in range(6)
    ]
    assert fake.chat_requests == 6 and fake.models_requests == 1
