"""Per-sample isolation in a batch, for every preset: random RolloutStates (hostile labels,
extra_info of any shape, missing fields) batched with one known-good sample. Each sample must end
scored (a finite numeric score) or FAILED with a message, and the good sample's reward must be the
one it gets when judged alone."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judger import RolloutState, Status
from judger.compat.verl import VerlDefaultJudgerConfig
from judger.presets import (
    DapoMathJudgerConfig,
    GEO3KJudgerConfig,
    GSM8KJudgerConfig,
    MathJudgerConfig,
    MathVerifyJudgerConfig,
    QAExactMatchJudgerConfig,
)

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

PRESETS: dict[str, Callable[[], Any]] = {
    "gsm8k": GSM8KJudgerConfig,
    "qa": QAExactMatchJudgerConfig,
    "math": MathJudgerConfig,
    "math_verify": MathVerifyJudgerConfig,
    "dapo": DapoMathJudgerConfig,
    "geo3k": GEO3KJudgerConfig,
    "verl_router": VerlDefaultJudgerConfig,
}

# a response each preset scores 1.0 against GOOD_LABEL
GOOD = {
    "gsm8k": "so #### 42",
    "qa": "<answer>42</answer>",
    "math": "\\boxed{42}",
    "math_verify": "\\boxed{42}",
    "dapo": "Answer: 42",
    "geo3k": "<think>x</think> \\boxed{42}",
    "verl_router": "so #### 42",
}
GOOD_LABEL = "42"
ROUTER_SOURCES = ["openai/gsm8k", "lighteval/MATH", "math_dapo", "hiyouga/geometry3k", "searchR1_nq", "nope"]

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
labels = st.one_of(
    json_value,
    st.just(10**5000),  # repr() refuses: the old dedup key raised for the whole batch
    st.sampled_from(["42", "\\frac{1}{2}", "", "  ", "{", "\\boxed{", "50\\%"]),
)
responses = st.one_of(
    st.none(),
    st.text(max_size=200),
    st.sampled_from(["#### 42", "\\boxed{42}", "Answer: 42", "<answer>42</answer>", "<answer>", "\\boxed{"]),
)


@st.composite
def states(draw: st.DrawFn) -> RolloutState:
    reward_model = draw(st.one_of(st.none(), st.builds(lambda label: {"ground_truth": label}, labels)))
    extra_fields: dict[str, Any] = {}
    if draw(st.booleans()):
        extra_fields["extra_info"] = draw(json_value)
    return RolloutState(
        response=draw(responses),
        reward_model=reward_model,
        data_source=draw(st.sampled_from(ROUTER_SOURCES)),
        response_ids=draw(st.one_of(st.none(), st.lists(st.integers(0, 9), max_size=3))),
        extra_fields=extra_fields,
        status=Status.COMPLETED,
    )


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def _good(preset: str) -> RolloutState:
    return RolloutState(
        response=GOOD[preset],
        reward_model={"ground_truth": GOOD_LABEL},
        data_source="openai/gsm8k",
        status=Status.COMPLETED,
    )


def _check_outcome(state: RolloutState) -> None:
    if state.status is Status.FAILED:
        assert state.error_msg, "a FAILED sample must say why"
        return
    assert state.reward is not None, f"neither scored nor FAILED: {state!r}"
    score = state.reward["score"]
    assert isinstance(score, (int, float)) and math.isfinite(score), state.reward


@pytest.mark.slow
@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_sample_scored_or_failed_alone(preset: str, loop: asyncio.AbstractEventLoop) -> None:
    judger = PRESETS[preset](timeout=20).build()
    alone = loop.run_until_complete(judger.judge(_good(preset)))
    assert alone.status is not Status.FAILED and alone.reward is not None and alone.reward["score"] == 1.0

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(st.lists(states(), min_size=1, max_size=6))
    def run(batch: list[RolloutState]) -> None:
        good = _good(preset)
        judged = loop.run_until_complete(judger.batch_judge([*batch, good]))
        assert len(judged) == len(batch) + 1
        for state in judged:
            _check_outcome(state)
        assert judged[-1].status is not Status.FAILED and judged[-1].reward == alone.reward

    try:
        run()
    finally:
        loop.run_until_complete(judger.aclose())


@pytest.mark.parametrize("preset", ["math", "dapo", "geo3k", "verl_router"])
@pytest.mark.parametrize(
    "bad",
    [{"extra_fields": {"extra_info": [1]}}, {"reward_model": {"ground_truth": 10**5000}}],
    ids=["extra_info_list", "huge_int_label"],
)
def test_unkeyable_sample_fails_only_itself(
    preset: str, bad: dict[str, Any], loop: asyncio.AbstractEventLoop
) -> None:
    """These raised from the dedup key and failed the whole batch."""
    judger = PRESETS[preset](timeout=20).build()
    try:
        fields: dict[str, Any] = {
            "response": GOOD[preset],
            "reward_model": {"ground_truth": GOOD_LABEL},
            "data_source": "lighteval/MATH",
            **bad,
        }
        judged = loop.run_until_complete(
            judger.batch_judge([RolloutState(**fields), _good(preset), _good(preset)])
        )
    finally:
        loop.run_until_complete(judger.aclose())
    _check_outcome(judged[0])
    for state in judged[1:]:
        assert state.status is not Status.FAILED and state.reward is not None and state.reward["score"] == 1.0


def test_geo3k_fails_a_missing_label(loop: asyncio.AbstractEventLoop) -> None:
    """GEO3K scored a None label 0.0 where the other math presets fail it."""
    judger = GEO3KJudgerConfig(timeout=20).build()
    try:
        missing, good = loop.run_until_complete(
            judger.batch_judge([RolloutState(response=GOOD["geo3k"]), _good("geo3k")])
        )
    finally:
        loop.run_until_complete(judger.aclose())
    assert missing.status is Status.FAILED and "ground truth is None" in (missing.error_msg or "")
    assert good.reward is not None and good.reward["score"] == 1.0


@pytest.mark.parametrize(
    ("label", "expected"),
    [(42, 1.0), (42.0, None), (["42"], "must be a string"), (None, "ground truth is None")],
)
def test_dapo_label_types(label: Any, expected: Any, loop: asyncio.AbstractEventLoop) -> None:
    """DAPO failed a non-string label with a raw AttributeError."""
    judger = DapoMathJudgerConfig(timeout=20).build()
    try:
        state = loop.run_until_complete(
            judger.judge(RolloutState(response="Answer: 42", reward_model={"ground_truth": label}))
        )
    finally:
        loop.run_until_complete(judger.aclose())
    if isinstance(expected, str):
        assert state.status is Status.FAILED and expected in (state.error_msg or "")
        assert "AttributeError" not in (state.error_msg or "")
    elif expected is None:
        _check_outcome(state)  # 42.0 vs "Answer: 42": compared by Math-Verify, scored either way
        assert state.status is not Status.FAILED
    else:
        assert state.reward is not None and state.reward["score"] == expected
