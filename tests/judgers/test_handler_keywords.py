"""Handlers are called by keyword, as XTuner and verl call them."""

from __future__ import annotations

from typing import Any

import pytest

from judger import JudgerConfig, NativeJudger, RolloutState, Status

pytestmark = pytest.mark.py310


def state(response: str, label: str = "42", **kw: Any) -> RolloutState:
    return RolloutState(message=[], response=response, reward_model={"ground_truth": label}, **kw)


def label_first(label: str, response: str, extra_info: dict) -> dict:
    # parameters in another order than (response, label, extra_info)
    return {"score": float(response.endswith(label)), "seen_response": response, "seen_label": label}


async def test_handler_with_parameters_in_another_order_gets_the_right_values() -> None:
    judger = NativeJudger(reward_handler=label_first)
    s = await judger.judge(state("the answer is 42"))
    # positional calls used to hand the label over as the response (score 0, silently)
    assert s.reward == {"score": 1.0, "seen_response": "the answer is 42", "seen_label": "42"}
    [b] = await judger.batch_judge([state("the answer is 42")])
    assert b.reward is not None and b.reward["seen_label"] == "42"


async def test_kwargs_only_handler_gets_xtuners_keywords() -> None:
    seen: list[dict[str, Any]] = []

    def anything(**kwargs: Any) -> dict:
        seen.append(kwargs)
        return {"score": 1.0}

    judger = JudgerConfig(judger_name="kw", reward_handler=anything, extra_info={"k": 1}).build()
    s = await judger.judge(state("x"))
    assert s.status is not Status.FAILED and s.reward == {"score": 1.0}
    assert seen == [{"response": "x", "label": "42", "extra_info": {"k": 1}}]


async def test_async_kwargs_handler_and_lambda() -> None:
    async def anything(**kwargs: Any) -> dict:
        return {"score": float(kwargs["label"] == "42")}

    s = await NativeJudger(reward_handler=anything).judge(state("x"))
    assert s.reward == {"score": 1.0}
    s = await NativeJudger(reward_handler=lambda **kw: {"score": len(kw)}).judge(state("x"))
    assert s.reward == {"score": 3.0}


async def test_verl_handler_in_another_order_and_with_kwargs() -> None:
    def compute_score(
        ground_truth: str, solution_str: str, data_source: str, extra_info: Any = None
    ) -> float:
        return float(solution_str.endswith(ground_truth) and data_source == "ds")

    s = await NativeJudger(reward_handler=compute_score).judge(state("is 42", data_source="ds"))
    assert s.reward == {"score": 1.0}

    def verl_kwargs(data_source: str, solution_str: str, **kwargs: Any) -> dict:
        return {"score": float(solution_str.endswith(kwargs["ground_truth"])), "keys": sorted(kwargs)}

    s = await NativeJudger(reward_handler=verl_kwargs).judge(state("is 42", data_source="ds"))
    assert s.reward == {"score": 1.0, "keys": ["extra_info", "ground_truth"]}


async def test_batch_handlers_get_plural_keywords_in_any_order() -> None:
    def batch(labels: list, extra_infos: list, responses: list) -> list:
        return [{"score": float(r.endswith(g))} for r, g in zip(responses, labels)]

    judger = NativeJudger(reward_handler=batch)
    assert judger.handler.batched
    out = await judger.batch_judge([state("42"), state("41")])
    assert [s.reward["score"] for s in out if s.reward] == [1.0, 0.0]


async def test_process_execution_calls_by_keyword_too() -> None:
    # dict(**kwargs) echoes its keywords: it only works when called by keyword
    judger = NativeJudger(reward_handler=dict, execution="process", timeout=30)
    out = await judger.batch_judge([state("is 42"), state("is 41")])
    assert [s.reward for s in out] == [
        {"response": "is 42", "label": "42", "extra_info": {}},
        {"response": "is 41", "label": "42", "extra_info": {}},
    ]


def test_handler_that_cannot_take_the_keywords_is_refused_at_build() -> None:
    def renamed(pred: str, gt: str, info: dict) -> dict:
        return {"score": 0.0}

    with pytest.raises(TypeError, match=r"name its parameters response, label, extra_info"):
        JudgerConfig(judger_name="bad", reward_handler=renamed).build()

    def two(response: str, label: str) -> dict:
        return {"score": 0.0}

    with pytest.raises(TypeError, match="extra_info"):
        NativeJudger(reward_handler=two)

    with pytest.raises(ValueError, match="collide"):
        NativeJudger(reward_handler=lambda **kw: {"score": 1}, handler_kwargs={"label": 1})


def test_required_parameters_beyond_the_convention_need_handler_kwargs() -> None:
    def scaled(response: str, label: str, extra_info: dict, scale: float) -> dict:
        return {"score": scale * (response == label)}

    with pytest.raises(TypeError, match=r"missing required argument\(s\) \['scale'\]"):
        NativeJudger(reward_handler=scaled)
    assert NativeJudger(reward_handler=scaled, handler_kwargs={"scale": 2.0}).handler.kwargs == {"scale": 2.0}

    def positional_only(response: str, label: str, extra_info: dict, /) -> dict:
        return {"score": 0.0}

    with pytest.raises(TypeError, match="positional only"):
        NativeJudger(reward_handler=positional_only)


def in_order(response: str, label: str, extra_info: dict, scale: float = 1.0) -> dict:
    return {"score": scale * float(response.endswith(label)), "seen": (response, label)}


def verl_style(data_source: Any, solution_str: str, ground_truth: str, extra_info: Any = None) -> float:
    return float(solution_str.endswith(ground_truth))


def keyword_extra(response: str, label: str, *, extra_info: dict) -> dict:
    return {"score": float(response.endswith(label)), "seen": (response, label)}


async def test_a_positional_call_only_where_it_binds_as_the_keyword_call() -> None:
    # the fast path calls fn(*args); it is taken only when the names match position by position
    cases = [
        (in_order, True),
        (verl_style, True),
        (label_first, False),
        (keyword_extra, False),
        (lambda **kw: {"score": 1.0}, False),
    ]
    for fn, positional in cases:
        assert NativeJudger(reward_handler=fn).handler.positional is positional, fn
    for fn in (in_order, keyword_extra):
        [s] = await NativeJudger(reward_handler=fn).batch_judge([state("the answer is 42")])
        assert s.reward is not None and s.reward["seen"] == ("the answer is 42", "42")
    scaled = NativeJudger(reward_handler=in_order, handler_kwargs={"scale": 3.0})
    assert (await scaled.judge(state("42"))).reward == {"score": 3.0, "seen": ("42", "42")}
