"""A preset's single-pass batch path (InlineScorerJudger) and ScorerJudger's payload path run a
``preprocess`` / ``postprocess`` given to a subclass or to one instance, as ``judge`` does."""

from __future__ import annotations

from typing import Any

import pytest

from judger import GSM8KJudgerConfig, RolloutState
from judger.presets.base import ScorerJudger
from judger.presets.inline import InlineScorerJudger

pytestmark = pytest.mark.py310


def gsm8k_states() -> list[RolloutState]:
    return [
        RolloutState(response="so #### 42", reward_model={"ground_truth": "42"}),
        RolloutState(response="#### 41", reward_model={"ground_truth": "42"}),
    ]


def tag(state: RolloutState, output: dict[str, Any]) -> RolloutState:
    state.reward = {**output, "tagged": True}
    return state


def exact(response: str, label: Any, extra_info: Any) -> dict[str, Any]:
    return {"score": float(response == label)}


async def test_a_postprocess_given_to_a_preset_instance_runs_in_batch_judge() -> None:
    judger = GSM8KJudgerConfig().build()
    assert isinstance(judger, InlineScorerJudger) and judger.judges_fields()
    judger.postprocess = tag  # type: ignore[method-assign]
    assert not judger.judges_fields()  # /judge must build states to run it
    out = await judger.batch_judge(gsm8k_states())
    assert [s.reward and s.reward.get("tagged") for s in out] == [True, True]
    assert [s.reward and s.reward["score"] for s in out] == [1.0, 0.0]
    single = await judger.judge(gsm8k_states()[0])
    assert single.reward == out[0].reward


async def test_a_preprocess_given_to_a_preset_instance_runs_in_batch_judge() -> None:
    judger = GSM8KJudgerConfig().build()
    preprocess = judger.preprocess
    judger.preprocess = lambda state: {**preprocess(state), "label": "41"}  # type: ignore[method-assign]
    out = await judger.batch_judge(gsm8k_states())
    assert [s.reward and s.reward["score"] for s in out] == [0.0, 1.0]


@pytest.mark.parametrize("base", [InlineScorerJudger, ScorerJudger])
async def test_a_scorer_subclass_postprocess_runs_in_batch_judge(base: type[ScorerJudger]) -> None:
    class Tagged(base):  # type: ignore[valid-type,misc]
        def preprocess(self, rollout_state: RolloutState) -> dict[str, Any]:
            return {**super().preprocess(rollout_state), "response": (rollout_state.response or "").strip()}

        def postprocess(self, rollout_state: RolloutState, output: dict[str, Any]) -> RolloutState:
            return tag(rollout_state, output)

    judger = Tagged("tagged", exact)
    states = [RolloutState(response=r, reward_model={"ground_truth": "1"}) for r in (" 1 ", "2")]
    out = await judger.batch_judge(states)
    assert [s.reward for s in out] == [{"score": 1.0, "tagged": True}, {"score": 0.0, "tagged": True}]
