"""The number a trainer gets for a sample judger could not score: by default the judger's lowest
score for that sample (so provoking a failure never pays more than a wrong answer), declared by the
presets, by a config's ``lowest_score``, routed by a composed judger; a number the user gives is
used as given, and a judged score below it is flagged once."""

from __future__ import annotations

import logging
import math
from typing import Any

import pytest

from judger import (
    ComposedJudgerConfig,
    DapoMathJudgerConfig,
    GSM8KJudgerConfig,
    JudgerConfig,
    MathJudgerConfig,
    RolloutState,
    Status,
)
from judger.cli.serve import _failure_reward, _UsageError
from judger.compat.verl import default_compute_score, default_compute_score_batch
from judger.compat.verl.managers import NaiveRewardManager
from judger.compat.verl.reward_managers import RewardBatch
from judger.core.failure_reward import FailureReward

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]


def state(data_source: Any) -> RolloutState:
    return RolloutState(data_source=data_source, response="x", status=Status.COMPLETED)


def minus_one_unless_equal(response: str, label: Any, extra_info: Any = None) -> dict[str, float]:
    return {"score": 1.0 if response == label else -1.0}


def test_presets_declare_their_lowest_score() -> None:
    assert DapoMathJudgerConfig().build().lowest_score == -1.0
    overlong = DapoMathJudgerConfig(
        enable_overlong_buffer=True, max_response_len=100, overlong_buffer_len=10, overlong_penalty_factor=0.5
    )
    assert overlong.build().lowest_score == -1.5  # a wrong answer at the length limit
    assert MathJudgerConfig().build().lowest_score == 0.0
    assert GSM8KJudgerConfig(format_score=-0.2).build().lowest_score == -0.2
    # a reward_handler of the user's decides the scores: unknown unless declared
    assert GSM8KJudgerConfig(reward_handler=minus_one_unless_equal).build().lowest_score is None
    declared = JudgerConfig(judger_name="mine", reward_handler=minus_one_unless_equal, lowest_score=-1.0)
    assert declared.build().lowest_score == -1.0


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_lowest_score_must_be_finite(bad: float) -> None:
    with pytest.raises(ValueError, match="lowest_score"):
        JudgerConfig(judger_name="mine", reward_handler=minus_one_unless_equal, lowest_score=bad)


def test_a_composed_judger_answers_for_the_branch_a_sample_routes_to() -> None:
    composed = ComposedJudgerConfig(
        branches={
            "dapo": DapoMathJudgerConfig(),
            "gsm8k": GSM8KJudgerConfig(),
            "inner": ComposedJudgerConfig(branches={"dapo2": DapoMathJudgerConfig()}),
        },
        merge_fn="judger:weighted_sum",
    ).build()
    assert composed.lowest_score_for(state("dapo")) == -1.0
    assert composed.lowest_score_for(state("gsm8k")) == 0.0
    assert composed.lowest_score_for(state({"gsm8k": 1.0})) == 0.0
    assert composed.lowest_score_for(state("inner")) == -1.0  # a nested composition routes on
    # judger's weighted_sum: the weighted sum of the branches' floors
    assert composed.lowest_score_for(state({"dapo": 0.5, "gsm8k": 0.5})) == -0.5
    assert composed.lowest_score_for(state({"dapo": 2, "inner": 1.0})) == -3.0
    assert composed.lowest_score_for(state({"dapo": -1.0, "gsm8k": 1.0})) is None  # needs DAPO's highest
    for weight in (True, float("nan"), "heavy"):  # weights the merge refuses: the sample fails, floor unknown
        assert composed.lowest_score_for(state({"dapo": weight, "gsm8k": 1.0})) is None
    # any other merge has no floor judger knows; a failure then gets 0.0, and is watched
    other = ComposedJudgerConfig(
        branches={"dapo": DapoMathJudgerConfig(), "gsm8k": GSM8KJudgerConfig()},
        merge_fn=lambda state, outputs: state,
    ).build()
    assert other.lowest_score_for(state({"dapo": 0.5, "gsm8k": 0.5})) is None
    declared = ComposedJudgerConfig(branches={"gsm8k": GSM8KJudgerConfig()}, lowest_score=-2.0).build()
    assert declared.lowest_score_for(state("gsm8k")) == -2.0


@pytest.mark.parametrize("bad", [None, "zero", math.nan, math.inf, True, "0.0"])
def test_a_setting_is_lowest_or_a_finite_number(bad: Any) -> None:
    judger = GSM8KJudgerConfig().build()
    with pytest.raises(ValueError, match="reward_kwargs.failure_score"):
        FailureReward(bad, judger, "reward_kwargs.failure_score")


def test_unknown_floor_gives_zero_and_a_lower_judged_score_is_flagged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    judger = JudgerConfig(judger_name="mine", reward_handler=minus_one_unless_equal).build()
    failure = FailureReward("lowest", judger, "reward_kwargs.failure_score")
    assert failure.of(state("any")) == 0.0
    with caplog.at_level(logging.WARNING):
        for score in (1.0, 0.5, -1.0, -1.0, -2.0):
            failure.watch(state("any"), score)
    flagged = [r.getMessage() for r in caplog.records if "makes the judger fail" in r.getMessage()]
    assert len(flagged) == 1
    assert "reward_kwargs.failure_score" in flagged[0] and "-1.0" in flagged[0]


def test_the_watch_keeps_each_routes_lowest_apart(caplog: pytest.LogCaptureFixture) -> None:
    # DAPO's -1 is at its floor; a later -0.5 on an undeclared branch is below that branch's 0.0
    # declared safe on threads: the test watches warnings, and its module is not a worker's to import
    mine = JudgerConfig(judger_name="mine", reward_handler=minus_one_unless_equal, execution="thread")
    composed = ComposedJudgerConfig(branches={"dapo": DapoMathJudgerConfig(), "mine": mine}).build()
    failure = FailureReward("lowest", composed, "failure_reward")
    with caplog.at_level(logging.WARNING):
        failure.watch(state("dapo"), -1.0)
        assert not caplog.records
        failure.watch(state("mine"), -0.5)
    assert any("data_source='mine'" in r.getMessage() for r in caplog.records)


def test_verl_manager_over_a_custom_function_flags_the_gap_and_honours_the_fix(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def score(data_source: str, solution_str: str, ground_truth: str, extra_info: Any = None) -> float:
        if solution_str == "raise":  # a response the user's function cannot handle
            raise ValueError("cannot parse")
        return 1.0 if solution_str == ground_truth else -1.0

    batch = RewardBatch(
        data_sources=["mine"] * 3,
        responses=["7", "8", "raise"],
        ground_truths=["7"] * 3,
        valid_response_lengths=[1, 1, 1],
        response_length=1,
    )
    with caplog.at_level(logging.WARNING):
        default = NaiveRewardManager(compute_score=score)(batch, return_dict=True)
    assert default["reward_tensor"][:, 0].tolist() == [1.0, -1.0, 0.0]
    assert any("reward_kwargs.failure_score" in r.getMessage() for r in caplog.records)
    fixed = NaiveRewardManager(compute_score=score, failure_score=-1.0)(batch, return_dict=True)
    assert fixed["reward_tensor"][:, 0].tolist() == [1.0, -1.0, -1.0]


def test_verl_default_function_scores_a_failure_as_the_routes_lowest() -> None:
    # DAPO's wrong answer scores -1: a response its scorer cannot take must not score above it
    assert default_compute_score("math_dapo", None, "5")["score"] == -1.0
    assert default_compute_score("math_dapo", None, "5", compat="verl")["score"] == -1.0
    assert default_compute_score("openai/gsm8k", None, "5")["score"] == 0.0
    assert default_compute_score("math_dapo", None, "5", on_failure="zero")["score"] == 0.0
    batch = default_compute_score_batch(["math_dapo", "openai/gsm8k"], [None, None], ["5", "5"])
    assert [r["score"] for r in batch] == [-1.0, 0.0]
    assert [r["judge_failure"] for r in batch] == ["error", "error"]


def test_serve_reads_failure_reward() -> None:
    assert _failure_reward("lowest") == "lowest"
    assert _failure_reward("-1") == -1.0
    for refused in ("none", "None", "null"):  # OpenRLHF 0.11 crashes its step on a reward it never got
        with pytest.raises(_UsageError, match="OpenRLHF 0.11 .* crashes its training step"):
            _failure_reward(refused)
    for bad in ("nan", "inf", "low"):
        with pytest.raises(_UsageError, match="--failure-reward"):
            _failure_reward(bad)


def test_serve_refuses_failure_reward_none_saying_why(capsys: pytest.CaptureFixture[str]) -> None:
    """OpenRLHF 0.11.2 retries a 5xx 5 times, then leaves the sample's reward None and its step
    crashes on it (``experience_maker.py``: ``Experience.rewards.to()``): refused before serving."""
    from judger.cli.main import main

    assert main(["serve", "--preset", "gsm8k", "--failure-reward", "none"]) == 2
    err = capsys.readouterr().err
    assert "--failure-reward none is refused" in err and "Experience.rewards" in err and "'lowest'" in err
