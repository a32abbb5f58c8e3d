"""Only the answer a response commits to is graded: never one inside ``<think>`` reasoning, never
two guesses at once. Every rule preset's default mode, each with its honest sibling; verl's mode
keeps verl's verdicts (bit-exact, farmable or not)."""

from __future__ import annotations

from typing import Any

import pytest

from judger.scorers import qa
from judger.scorers.committed import committed_text
from judger.scorers.math import dapo, geo3k, gsm8k, reward, verify

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]


@pytest.mark.parametrize(
    ("text", "committed"),
    [
        ("no tags at all", "no tags at all"),
        ("<think>draft</think> answer", " answer"),
        ("template opened it</think> answer", " answer"),
        ("<think>a</think> b <think>c</think> d", " d"),
        ("<think>never closed \\boxed{5}", ""),
        ("<think>a</think> b <think>reopened", " b "),
    ],
)
def test_the_committed_text(text: str, committed: str) -> None:
    assert committed_text(text) == committed


def _gsm8k(response: str, gold: str) -> float:
    single = gsm8k.compute_score(response, gold)["score"]
    (batch,) = gsm8k.make_batch_scorer()([response], [gold])
    assert batch["score"] == single  # the batch fast path and the scorer agree
    return float(single)


SCORERS: dict[str, Any] = {
    "gsm8k": _gsm8k,
    "math": lambda r, g: reward.compute_score(r, g)["score"],
    "dapo": lambda r, g: dapo.compute_score(r, g)["score"],
    "geo3k": lambda r, g: geo3k.compute_score(r, g)["acc"] * 1.0,
    "math_verify": lambda r, g: verify.compute_score(r, g)["score"],
    "qa": lambda r, g: qa.compute_score(r, {"target": [g]})["score"],
}

# (preset, response, gold, paid): a guess inside reasoning or next to another is not paid
CASES = [
    ("gsm8k", "#### 72", "72", True),
    ("gsm8k", "#### 72 or 73", "72", False),
    ("gsm8k", "#### 73 or 72", "72", False),
    ("gsm8k", "#### 72, 73", "72", False),
    ("gsm8k", "#### 72 and 73", "72", False),
    ("gsm8k", "#### $72.", "72", True),
    ("gsm8k", "<think>#### 72</think> I cannot tell.", "72", False),
    ("gsm8k", "<think>" + "x " * 400 + "#### 72", "72", False),  # reasoning never closed, opened far back
    ("gsm8k", "<think>maybe #### 73</think> #### 72", "72", True),
    ("math", "\\boxed{73} or \\boxed{72}", "72", False),
    ("math", "<think>\\boxed{72}</think> not sure", "72", False),
    ("math", "<think>\\boxed{73}</think> so \\boxed{72}", "72", True),
    ("dapo", "Answer: 72", "72", True),
    ("dapo", "Answer: 72 or 73", "72", False),
    ("dapo", "\\boxed{73} or \\boxed{72}", "72", False),
    ("dapo", "<think>Answer: 72</think> Answer: 73", "72", False),
    ("dapo", "<think>Answer: 73</think> Answer: 72", "72", True),
    ("geo3k", "<think>x</think> \\boxed{72}", "72", True),
    ("geo3k", "<think>x</think> \\boxed{73} or \\boxed{72}", "72", False),
    ("geo3k", "<think>\\boxed{72}</think> none", "72", False),
    ("math_verify", "\\boxed{72}", "72", True),
    ("math_verify", "\\boxed{73} or \\boxed{72}", "72", False),
    ("math_verify", "<think>\\boxed{72}</think> none", "72", False),
    ("math_verify", "\\boxed{7 \\text{ km/h}}", "7 \\text{ m/s}", False),
    ("qa", "<answer>Paris</answer>", "Paris", True),
    ("qa", "<answer>Paris or London</answer>", "Paris", False),
    ("qa", "<think><answer>Paris</answer></think> <answer>London</answer>", "Paris", False),
    ("qa", "<think><answer>Paris</answer></think> I give up.", "Paris", False),
]


@pytest.mark.parametrize(("preset", "response", "gold", "paid"), CASES)
def test_only_a_committed_single_answer_is_paid(preset: str, response: str, gold: str, paid: bool) -> None:
    score = SCORERS[preset](response, gold)
    assert (score >= 1.0) is paid, (preset, response, score)


def test_a_hedge_never_scores_above_a_wrong_answer() -> None:
    # format_score is what a wrong answer in the format earns: a hedge earns no more
    wrong = gsm8k.compute_score("#### 5", "72", format_score=0.1)
    hedge = gsm8k.compute_score("#### 72 or 73", "72", format_score=0.1)
    assert hedge["score"] == wrong["score"] == 0.1
    assert hedge["pred"] == "72 or 73"  # majority voting never counts it as a vote for 72


@pytest.mark.parametrize(
    ("scorer", "response", "gold"),
    [
        (lambda r, g: gsm8k.compute_score(r, g, compat="verl")["score"], "#### 72 or 73", "72"),
        (lambda r, g: reward.compute_score(r, g, compat="verl")["score"], "<think>\\boxed{72}</think>", "72"),
        (lambda r, g: dapo.compute_score(r, g, compat="verl")["score"], "\\boxed{73} or \\boxed{72}", "72"),
    ],
)
def test_verl_mode_keeps_verls_verdicts(scorer: Any, response: str, gold: str) -> None:
    assert scorer(response, gold) == 1.0  # verl pays these; compat="verl" must too
