"""A RayJudger runs its local judger's pre/postprocess on the driver; a RayJudger subclass's own,
or one given to the instance, replaces them in ``batch_judge`` as in ``judge``."""

from __future__ import annotations

import os
from typing import Any

import pytest

from judger import JudgerConfig, RemoteJudger, RolloutState
from judger.testing.ray import small_resources

pytestmark = pytest.mark.ray


def config() -> JudgerConfig:
    return JudgerConfig(
        judger_name="exact_remote",
        reward_handler="judger.testing.handlers:exact_match",
        cpu_resources=small_resources(1),
    )


def states() -> list[RolloutState]:
    return [RolloutState(response=r, reward_model={"ground_truth": "4"}) for r in (" 4 ", "5", "4")]


class Driverside(RemoteJudger):
    def preprocess(self, rollout_state: RolloutState) -> dict[str, Any]:
        return {**super().preprocess(rollout_state), "label": "5"}  # every label read as 5

    def postprocess(self, rollout_state: RolloutState, output: dict[str, Any]) -> RolloutState:
        rollout_state.reward = {"score": output["score"], "on_driver": os.getpid()}
        return rollout_state


async def test_a_ray_judger_subclass_pre_and_postprocess_run_on_the_driver(ray_cluster: Any) -> None:
    judger = Driverside(config())
    try:
        out = await judger.batch_judge(states())
        assert [s.reward for s in out] == [{"score": s, "on_driver": os.getpid()} for s in (0.0, 1.0, 0.0)]
        assert (await judger.judge(states()[0])).reward == out[0].reward
    finally:
        await judger.aclose()


async def test_a_postprocess_given_to_a_ray_judger_instance_runs_in_batch_judge(ray_cluster: Any) -> None:
    judger = config().build()
    try:
        plain = await judger.batch_judge(states())
        judger.postprocess = lambda state, output: state  # type: ignore[method-assign]  # writes nothing
        untouched = await judger.batch_judge(states())
        assert [s.reward and s.reward["score"] for s in plain] == [1.0, 0.0, 1.0]
        assert [s.reward for s in untouched] == [None, None, None]
    finally:
        await judger.aclose()
