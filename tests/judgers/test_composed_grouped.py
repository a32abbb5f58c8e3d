"""ComposedJudger judges the samples routed to one branch as a group: the same rewards, statuses and
failures as its payload path (each sample wrapped per branch), on a batch that mixes branches,
failures and answers that need the parser."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from judger import RolloutState
from judger.compat.verl import default_judger_config
from judger.core.judger import Judger
from judger.judgers.composed import ComposedJudger

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

MATH = "DigitalLearningGmbH/MATH-lighteval"


def _state(source: Any, response: str | None, gt: Any, prompt: str = "q") -> RolloutState:
    return RolloutState(
        message=[{"role": "user", "content": prompt}],
        data_source=source,
        response=response,
        reward_model={"ground_truth": gt},
        group_id="g",
    )


def _batch() -> list[RolloutState]:
    return [
        _state(MATH, "so \\boxed{42}", "42"),
        _state("openai/gsm8k", "#### 42", "42"),
        _state(MATH, "so \\boxed{\\frac{1}{2}}", "0.5"),
        _state(MATH, "no box", "7"),
        _state(MATH, None, "7"),
        _state(MATH, "so \\boxed{41}", None),
        _state("openai/gsm8k", "#### 41", "42"),
        _state(MATH, "so \\boxed{3, -1, 2}", "-1, 2, 3", "List the roots in increasing order."),
        _state(MATH, "so \\boxed{-1, 2, 3}", "-1, 2, 3", "List the roots in increasing order."),
        _state(MATH, "so \\boxed{1} and \\boxed{2}", "1, 2"),
        _state("no/such/source", "#### 1", "1"),
    ]


def _seen(states: list[RolloutState]) -> list[tuple[Any, ...]]:
    return [(s.status, s.reward, s.error_msg, s.extra_fields.get("judge_failure")) for s in states]


def test_grouped_batch_equals_the_payload_path() -> None:
    judger = default_judger_config().build()
    try:
        batched = _batch()
        asyncio.run(judger.batch_judge(batched))
        wrapped = _batch()
        asyncio.run(Judger.batch_judge(judger, wrapped))
    finally:
        judger.close()
    assert _seen(batched) == _seen(wrapped)
    assert batched[0].reward is not None and batched[0].reward["score"] == 1.0
    assert batched[2].reward is not None and batched[2].reward["score"] == 1.0  # graded on the pool
    assert batched[7].reward is not None and batched[7].reward["score"] == 0.0  # the order is read


def test_a_group_routed_once_per_data_source(monkeypatch) -> None:
    judger = default_judger_config().build()
    routed: list[Any] = []
    route = type(judger).route

    def counting(self: ComposedJudger, data_source: Any) -> list[str]:
        routed.append(data_source)
        return route(self, data_source)

    monkeypatch.setattr(type(judger), "route", counting)
    try:
        states = [_state(MATH, "so \\boxed{42}", "42") for _ in range(50)]
        asyncio.run(judger.batch_judge(states))
    finally:
        judger.close()
    assert all(s.reward is not None and s.reward["score"] == 1.0 for s in states)
    assert routed == [MATH]
