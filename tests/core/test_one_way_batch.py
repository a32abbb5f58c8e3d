"""One batch method. Built-ins implement ``_judge_batch``; the base class wraps it
with dedup, validation and the on_error policy; ``judge_payload`` is derived, never overridden by a
built-in, so no call goes ``judge_payload(list) -> run_payloads -> overridden run_payloads``."""

from __future__ import annotations

from typing import Any

import pytest

from judger import Judger, RolloutState, Status
from judger.core.judger import BatchJudger, JudgerOutputBatch, JudgerPayloadBatch
from judger.judgers.composed import ComposedJudger
from judger.judgers.native import NativeJudger
from judger.presets.base import ScorerJudger
from judger.remote.ray_judger import RayJudger
from judger.verifiers.cascade import CascadeJudger
from judger.verifiers.llm import LLMJudger

pytestmark = pytest.mark.py310


@pytest.mark.parametrize(
    "cls", [NativeJudger, ComposedJudger, ScorerJudger, RayJudger, LLMJudger, CascadeJudger]
)
def test_built_ins_implement_only_the_batch_method(cls: type[BatchJudger]) -> None:
    assert issubclass(cls, BatchJudger)
    assert "_judge_batch" in vars(cls)
    assert "judge_payload" not in vars(cls) and "run_payloads" not in vars(cls)


class Counting(Judger):
    """A user judger exactly as the seeds write it: only judge_payload."""

    def __init__(self) -> None:
        super().__init__("counting")
        self.calls: list[int] = []

    async def judge_payload(self, payload: JudgerPayloadBatch) -> JudgerOutputBatch:
        if isinstance(payload, list):
            self.calls.append(len(payload))
            return [{"score": float(p["response"] == "1")} for p in payload]
        self.calls.append(1)
        if payload["response"] == "bad":
            raise ValueError("bad sample")
        return {"score": float(payload["response"] == "1")}


async def test_a_user_subclass_keeps_the_seed_contract() -> None:
    judger = Counting()
    states = [RolloutState(response=r) for r in ("1", "0", "1")]
    out = await judger.batch_judge(states)
    assert [s.reward["score"] for s in out] == [1.0, 0.0, 1.0] and judger.calls == [3]
    one = await judger.judge(RolloutState(response="bad"))
    assert one.status is Status.FAILED and one.error_msg == "ValueError: bad sample"


async def test_built_in_judge_payload_list_goes_through_the_batch_method_once() -> None:
    seen: list[int] = []

    class Spy(NativeJudger):
        async def _judge_batch(self, payloads: list[dict[str, Any]]) -> list[Any]:
            seen.append(len(payloads))
            return await super()._judge_batch(payloads)

    judger = Spy(reward_handler=lambda response, label, extra_info: {"score": 1.0})
    outs = await judger.judge_payload([{"response": "a", "label": 1}, {"response": "b", "label": 1}])
    assert outs == [{"score": 1.0}, {"score": 1.0}] and seen == [2]
    await judger.aclose()
