"""DAPO math: Minerva extraction and normalisation, both modes, eos stripping, overlong penalty, config.

``compat="verl"`` expectations were cross-checked against verl 0.9.1's ``math_dapo`` loaded by path
(``python bench/bench_math.py --check-verl``).
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

import judger
from judger import RolloutState
from judger.scorers.math import dapo
from judger.scorers.math.dapo import normalize_final_answer

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]


@pytest.mark.parametrize(
    ("raw", "normalised"),
    [
        ("x = 5", "5"),
        ("$\\frac{1}{2}$", "\\frac{1}{2}"),
        ("\\frac12", "\\frac{1}{2}"),
        ("\\sqrt3", "\\sqrt{3}"),
        ("1,000", "1000"),
        ("10 dollars", "10"),
        ("90^\\circ", "90"),
        ("\\text{(B)}", "(B)"),
        ("\\boxed{7}", "7"),
        ("a dog", "dog"),
        ("[INVALID]", "[INVALID]"),
    ],
)
def test_normalize_final_answer(raw: str, normalised: str) -> None:
    assert normalize_final_answer(raw) == normalised


# (response, label, verl (score, pred), ours score)
GOLDEN = [
    ("Work...\nAnswer: 42", "42", (1.0, "42"), 1.0),
    ("Work...\nanswer : $x = 42$", "42", (1.0, "42"), 1.0),
    ("Work...\nAnswer: $x = 42$.", "42", (-1.0, "42."), 1.0),
    ("Answer: 41\nAnswer: 42", "42", (1.0, "42"), 1.0),
    ("Answer: 41", "42", (-1.0, "41"), -1.0),
    ("Answer: 1,000 dollars", "1000", (1.0, "1000"), 1.0),
    # string-equality false negatives that equivalence fixes
    ("Answer: 5.0", "5", (-1.0, "5.0"), 1.0),
    ("Answer: 0.5", "\\frac{1}{2}", (-1.0, "0.5"), 1.0),
    ("Answer: 1/2", "\\frac12", (-1.0, "1/2"), 1.0),
    ("Answer: \\pi/2", "\\frac{\\pi}{2}", (-1.0, "\\pi/2"), 1.0),
    # no Answer line: verl 0.9 grades the last box of the last 100 characters verbatim
    ("so \\boxed{42}", "42", (1.0, "42"), 1.0),
    ("so \\boxed{42.0}", "42", (-1.0, "42.0"), 1.0),
    ("nothing to see", "42", (-1.0, "[INVALID]"), -1.0),
    # only the last 300 characters count
    ("Answer: 42" + " pad" * 100, "42", (-1.0, "[INVALID]"), -1.0),
]


@pytest.mark.parametrize(("response", "gt", "verl", "ours"), GOLDEN)
def test_dapo_golden_both_modes(response: str, gt: str, verl: tuple[float, str], ours: float) -> None:
    v = dapo.compute_score(response, gt, compat="verl")
    assert (v["score"], v["pred"]) == verl and v["acc"] is (verl[0] == 1.0)
    o = dapo.compute_score(response, gt)
    assert o["score"] == ours and o["acc"] is (ours == 1.0)


def test_older_verl_without_boxed_fallback_and_strict_box_mode() -> None:
    assert dapo.compute_score("so \\boxed{42}", "42", compat="verl", boxed_fallback=False) == {
        "score": -1.0,
        "acc": False,
        "pred": "[INVALID]",
    }
    strict = dapo.compute_score("Answer: 1\n\\boxed{42}", "42", compat="verl", strict_box_verify=True)
    assert strict["acc"] is True and strict["pred"] == "42"
    assert dapo.compute_score("\\boxed{42.0}", "42", strict_box_verify=True)["acc"] is True
    assert dapo.compute_score("\\boxed{42.0}", "42", compat="verl", strict_box_verify=True)["acc"] is False


def test_eos_is_stripped_once_before_the_window() -> None:
    text = "Answer: 42<|im_end|>"
    assert dapo.compute_score(text, "42", compat="verl")["acc"] is False  # verl's manager strips it first
    assert dapo.compute_score(text, "42", compat="verl", eos_token="<|im_end|>")["acc"] is True


@pytest.mark.parametrize(
    ("length", "penalty"),
    [(100, 0.0), (3072, 0.0), (3584, -0.5), (4096, -1.0), (4608, -1.5)],
)
def test_overlong_penalty_matches_verl_formula(length: int, penalty: float) -> None:
    out = dapo.compute_score(
        "Answer: 42",
        "42",
        response_length=length,
        max_response_len=4096,
        overlong_buffer_len=1024,
        overlong_penalty_factor=1.0,
    )
    assert out["overlong_reward"] == pytest.approx(penalty)
    assert out["score"] == pytest.approx(1.0 + penalty)
    assert out["overlong"] is (penalty < 0)


def test_config_validation_names_the_missing_field() -> None:
    cfg = judger.DapoMathJudgerConfig()
    assert (cfg.execution, cfg.judger_name) == ("process", "math_dapo")
    assert judger.DapoMathJudgerConfig(compat="verl").execution == "inline"
    with pytest.raises(ValidationError, match="overlong_buffer_len"):
        judger.DapoMathJudgerConfig(
            enable_overlong_buffer=True, max_response_len=4096, overlong_penalty_factor=1.0
        )
    with pytest.raises(ValidationError, match="max_response_len"):
        judger.DapoMathJudgerConfig(
            enable_overlong_buffer=True, overlong_buffer_len=10, overlong_penalty_factor=1.0
        )
    with pytest.raises(ValidationError, match="overlong_penalty_factor"):
        judger.DapoMathJudgerConfig(enable_overlong_buffer=True, max_response_len=10, overlong_buffer_len=5)
    with pytest.raises(ValidationError, match="must not exceed"):
        judger.DapoMathJudgerConfig(
            enable_overlong_buffer=True,
            max_response_len=10,
            overlong_buffer_len=50,
            overlong_penalty_factor=1.0,
        )


def rollout(response: str, n_tokens: int | None, gt: str = "42") -> RolloutState:
    return RolloutState(
        message=[{"role": "user", "content": "q"}],
        response=response,
        response_ids=None if n_tokens is None else list(range(n_tokens)),
        reward_model={"ground_truth": gt},
    )


@pytest.mark.parametrize("compat", [None, "verl"])
async def test_judger_uses_len_response_ids_for_the_penalty(compat: str | None) -> None:
    cfg = judger.DapoMathJudgerConfig(
        compat=compat,
        eos_token="</s>",
        enable_overlong_buffer=True,
        max_response_len=4096,
        overlong_buffer_len=1024,
        overlong_penalty_factor=1.0,
    )
    j = cfg.build()
    out = await j.batch_judge(
        [
            rollout("Answer: 42</s>", 3584),
            rollout("Answer: 41", 10),
            rollout("Answer: 42</s>", 100),
            rollout("x", None),
        ]
    )
    assert out[0].reward["score"] == pytest.approx(0.5) and out[0].reward["overlong"] is True
    assert out[1].reward["score"] == -1.0 and out[1].reward["overlong_reward"] == 0.0
    assert out[2].reward["score"] == 1.0 and out[2].reward["acc"] is True
    assert out[3].reward is None and "response_ids" in out[3].error_msg


async def test_judger_without_buffer_ignores_response_ids() -> None:
    j = judger.DapoMathJudgerConfig().build()
    s = await j.judge(rollout("Answer: 5.0", None, gt="5"))
    assert s.reward == {"score": 1.0, "acc": True, "pred": "5.0"}


async def test_an_answer_that_stalls_the_equivalence_check_scores_as_wrong_not_failed() -> None:
    # a failure would score 0.0 through verl's managers, above DAPO's -1 for a wrong answer: a
    # policy unsure of the answer would learn to write one that stalls Math-Verify's check
    import time

    from judger import Status

    j = judger.DapoMathJudgerConfig(timeout=1.0).build()
    await j.judge(rollout("Answer: 1", None, gt="1"))
    started = time.monotonic()
    s = await j.judge(rollout("Answer: 9^{9^{9^9}}", None, gt="1"))
    assert time.monotonic() - started < 5 * 1.2  # normally the 1 s deadline and a respawn; a hang: hours
    assert s.status == Status.INIT and s.reward == {"score": -1.0, "acc": False, "pred": "9^{9^{9^9}}"}
    # verl mode never leaves the regex path: bounded by the 300-character window
    v = (
        await judger.DapoMathJudgerConfig(compat="verl")
        .build()
        .judge(rollout("Answer: 9^{9^{9^9}}", None, gt="1"))
    )
    assert v.reward["score"] == -1.0


def test_through_verls_api_an_answer_that_stalls_the_check_scores_minus_one() -> None:
    from judger.compat.verl.compute_score import default_compute_score

    stalled = default_compute_score("math_dapo", "Answer: 9^{9^{9^{9^9}}}", "42", timeout=1.0)
    assert stalled["score"] == -1.0 and stalled["acc"] is False
    assert default_compute_score("math_dapo", "Answer: 42", "42", timeout=1.0)["score"] == 1.0


async def test_a_timeout_fallback_that_raises_fails_only_its_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    from judger import Status
    from judger.presets.dapo import DapoMathJudger

    def broken(self: DapoMathJudger, payload: dict) -> dict:
        raise ValueError("fallback broke")

    monkeypatch.setattr(DapoMathJudger, "timeout_result", broken)
    j = judger.DapoMathJudgerConfig(timeout=1.0).build()
    stalled, fine = await j.batch_judge(
        [rollout("Answer: 9^{9^{9^9}}", None, gt="1"), rollout("Answer: 1/2", None, gt="\\frac{1}{2}")]
    )
    assert stalled.status == Status.FAILED and "fallback broke" in (stalled.error_msg or "")
    assert fine.reward is not None and fine.reward["score"] == 1.0
