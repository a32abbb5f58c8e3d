"""prepare_train_data: skipping, validation, layout and advantages."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest

from judger import RolloutState, Status
from judger.trainer import prepare_train_data
from judger.trainer.training import IGNORE_INDEX, grpo_advantages, rloo_advantages

pytestmark = pytest.mark.py310


def sample(score: Any = 1.0, **fields: Any) -> RolloutState:
    base: dict[str, Any] = {
        "message": [{"role": "user", "content": "q"}],
        "prompt_ids": [101, 102, 103],
        "response": "ok",
        "response_ids": [7, 8, 9],
        "status": Status.COMPLETED,
        "reward": {"score": score} if score is not None else None,
    }
    base.update(fields)
    return RolloutState(**base)


def test_layout_labels_and_advantages() -> None:
    group = [sample(1.0, response_mask=[1, 0, 1], logprobs=[-0.1, -0.2, -0.3]), sample(0.0)]
    data = prepare_train_data([group])
    first, second = data.samples
    assert first.input_ids == [101, 102, 103, 7, 8]
    # P - 1 = 2 prompt positions ignored, then the response tokens, -100 where the mask is 0
    assert first.labels == [IGNORE_INDEX, IGNORE_INDEX, 7, IGNORE_INDEX, 9]
    adv = first.advantage
    assert adv == pytest.approx((1.0 - 0.5) / (np.std([1.0, 0.0], ddof=1) + 1e-8))
    assert first.advantages == [0.0, 0.0, adv, 0.0, adv]
    assert first.rollout_logprobs == [0.0, 0.0, -0.1, 0.0, -0.3]
    assert second.labels == [IGNORE_INDEX, IGNORE_INDEX, 7, 8, 9]
    assert second.advantage == pytest.approx(-adv)
    assert len(first.input_ids) == len(first.labels) == len(first.advantages)
    assert first.state is group[0]


def test_group_of_one_and_zero_variance_give_zero_not_nan() -> None:
    data = prepare_train_data([[sample(1.0)], [sample(0.5), sample(0.5), sample(0.5)]])
    assert [s.advantage for s in data.samples] == [0.0, 0.0, 0.0, 0.0]
    assert not any(np.isnan(a) for s in data.samples for a in s.advantages)


def test_skipped_groups_are_counted_by_reason(caplog: pytest.LogCaptureFixture) -> None:
    groups = [
        [sample(1.0), sample(0.0, status=Status.ABORTED)],
        [sample(1.0, status=Status.FILTERED)],
        [sample(None, status=Status.FAILED)],
        [sample(1.0, response="", response_ids=[])],
        [sample(1.0, response_ids=[])],
        [sample(1.0), sample(0.0)],
    ]
    with caplog.at_level(logging.WARNING, logger="judger.trainer.training"):
        data = prepare_train_data(groups)
    assert data.skipped == {
        "aborted": 1,
        "filtered": 1,
        "failed": 1,
        "empty_response": 1,
        "empty_response_ids": 1,
    }
    assert data.num_skipped == 5 and data.num_groups == 6 and len(data.samples) == 2
    assert "skipped 5 of 6 groups" in caplog.text


def test_a_group_with_an_answer_that_is_only_eos_is_kept() -> None:
    eos = 2
    group = [sample(1.0), sample(0.0, response="", response_ids=[eos], logprobs=[-0.5])]
    data = prepare_train_data([group])
    assert data.skipped == {} and len(data.samples) == 2
    only_eos = data.samples[1]
    assert only_eos.input_ids == [101, 102, 103] and only_eos.labels == [IGNORE_INDEX, IGNORE_INDEX, eos]
    assert only_eos.advantage < 0 and only_eos.rollout_logprobs == [0.0, 0.0, -0.5]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (sample(None), "reward is None"),
        (sample(1.0, reward={"acc": True}), "has no 'score'"),
        (sample("high"), "must be a finite number"),
        (sample(float("nan")), "must be a finite number"),
        (sample(True), "must be a finite number"),
        (sample(1.0, response_mask=[1, 1]), "response_mask has 2 entries"),
        (sample(1.0, prompt_ids=None), "prompt_ids is empty"),
    ],
)
def test_malformed_samples_raise_naming_the_sample(bad: RolloutState, message: str) -> None:
    bad.rollout_id = 42
    with pytest.raises(ValueError, match=message) as info:
        prepare_train_data([[sample(1.0)], [sample(0.0), bad]])
    assert "sample 1 of group 1" in str(info.value) and "rollout_id=42" in str(info.value)


def test_pluggable_estimators() -> None:
    group = [sample(1.0), sample(0.0), sample(0.0)]
    assert [s.advantage for s in prepare_train_data([group], "rloo").samples] == pytest.approx(
        rloo_advantages(np.array([1.0, 0.0, 0.0])).tolist()
    )
    # RLOO: each sample against the mean of the others
    assert rloo_advantages(np.array([1.0, 0.0, 0.0]))[0] == pytest.approx(1.0 - 0.0)
    custom = prepare_train_data([group], lambda s: s * 10).samples
    assert [s.advantage for s in custom] == [10.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="unknown advantage_estimator"):
        prepare_train_data([group], "ppo")
    with pytest.raises(ValueError, match="shape"):
        prepare_train_data([group], lambda s: s[:1])
    with pytest.raises(ValueError, match="non-finite"):
        prepare_train_data([group], lambda s: np.full_like(s, np.nan))


def test_grpo_matches_formula() -> None:
    scores = np.array([1.0, -1.0, 1.0, 1.0])
    expected = (scores - scores.mean()) / (scores.std(ddof=1) + 1e-8)
    assert grpo_advantages(scores) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"response_ids": [7, "garbage", 9]}, "response_ids holds 'garbage'"),
        ({"response_ids": [7, None, 9]}, "response_ids holds None"),
        ({"response_ids": [7, True, 9]}, "response_ids holds True"),
        ({"response_ids": [7, 3.5, 9]}, "response_ids holds 3.5"),
        ({"response_ids": [7, -7, 9]}, "negative id (-7)"),
        ({"response_ids": [7, 2**63 + 5, 9]}, "beyond 64 bits"),
        ({"response_ids": [7, 200_000, 9]}, "id 200000, not below the vocabulary size 151643"),
        ({"prompt_ids": [101, "x", 103]}, "prompt_ids holds 'x'"),
        ({"logprobs": [-0.1, float("nan"), -0.3]}, "non-finite"),
        ({"logprobs": [-0.1, 0.5, -0.3]}, "positive value (0.5)"),
        ({"logprobs": [-0.1]}, "1 logprobs for 3 response tokens"),
        ({"response": "ok \ud800"}, "not encodable as UTF-8"),
        ({"response": "ok\x00"}, "NUL"),
    ],
)
def test_invalid_generations_fail_the_sample_and_skip_the_group(fields: dict[str, Any], problem: str) -> None:
    bad = sample(1.0, **fields)
    good = [sample(1.0), sample(0.0)]
    data = prepare_train_data([good, [sample(0.0), bad]], vocab_size=151_643)
    assert [t.state for t in data.samples] == good
    assert data.skipped == {"invalid": 1}
    assert bad.status is Status.FAILED and bad.reward is None
    assert bad.error_msg is not None and problem in bad.error_msg
    assert bad.response_ids is None and bad.logprobs is None
    assert bad.response is None or bad.response.encode("utf-8")  # a sink can write it
