"""LLM verifiers reading replies as a real small instruct model writes them (SmolLM2-135M-Instruct,
seen in the serving tier), from a grader that behaves as llama.cpp's server does: every reply is
read or fails saying which rule found no verdict, and nothing ambiguous is guessed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from judger import CompassVerifierV2Config, RolloutState, Status
from judger.presets import GSM8KJudgerConfig
from judger.testing.fake_openai import LlamaCppFake
from judger.verifiers import CascadeJudgerConfig, LLMJudgerConfig

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

Q = "What is 6 x 7?"
YES_NO = """Question: {question}
Reference answer: {gold_answer}
Student answer: {response}
Is the student's answer correct? Reply YES or NO."""


def replying(fake: LlamaCppFake, text: str) -> None:
    """Every grading reply is ``text`` (whatever the prompt)."""
    fake.chat_reply = lambda messages: text  # type: ignore[method-assign]
    fake.responder = lambda prompt, j: text


async def judge(config: Any, *states: RolloutState) -> list[RolloutState]:
    async with config.build() as judger:
        return list(await judger.batch_judge(list(states)))


def compass(url: str) -> CompassVerifierV2Config:
    # any model name: llama.cpp serves whatever the request names
    return CompassVerifierV2Config(hosts=[url], model="smollm2", max_tokens=128, retry_backoff=0.01)


async def test_compass_reads_a_verdict_that_opens_the_reply(
    llama_grader: tuple[LlamaCppFake, str], make_state: Callable[..., RolloutState]
) -> None:
    fake, url = llama_grader
    replying(fake, "A:\nThe answer is correct.")  # SmolLM2 on llama.cpp, max_tokens 32
    (right,) = await judge(compass(url), make_state("6 x 7 = \\boxed{42}", "42", Q))
    assert right.status == Status.COMPLETED and right.reward is not None, right.error_msg
    assert right.reward["score"] == 1.0 and right.reward["verdict"] == "correct"


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ("A:\n\nA:\n\nB:\n\nC:\n\nA:\n\n", "the reply gives different verdicts"),  # SmolLM2 on vLLM
        ("A. The answer is wrong.", "no verdict: no \\boxed{A|B|C}"),
        ("A:\nThe student wrote 41.\nFinal Judgment: B", "A (the first line); B (Final Judgment)"),
    ],
)
async def test_compass_fails_an_ambiguous_reply_saying_why(
    llama_grader: tuple[LlamaCppFake, str], reply: str, why: str, make_state: Callable[..., RolloutState]
) -> None:
    fake, url = llama_grader
    replying(fake, reply)
    (failed,) = await judge(compass(url), make_state("\\boxed{42}", "42", Q))
    assert failed.status == Status.FAILED and failed.reward is None
    assert why in (failed.error_msg or ""), failed.error_msg


async def test_compass_does_not_read_an_echo_of_the_response(
    llama_grader: tuple[LlamaCppFake, str], make_state: Callable[..., RolloutState]
) -> None:
    """The policy opens its answer with "A:"; a grader that opens its reply by quoting it gave no verdict."""
    fake, url = llama_grader
    replying(fake, "A:\n41 is the candidate's answer.")
    (echoed,) = await judge(compass(url), make_state("A:\n41", "42", Q))
    assert echoed.status == Status.FAILED and "repeats a line of the grading prompt" in (
        echoed.error_msg or ""
    )


def yes_no(url: str, pattern: str) -> LLMJudgerConfig:
    return LLMJudgerConfig(
        hosts=[url],
        prompt_template=YES_NO,
        verdict_pattern=pattern,
        verdict_scores={"YES": 1.0, "NO": 0.0},
        verdict_names={"YES": "correct", "NO": "incorrect"},
        correct_verdicts=["YES"],
        max_tokens=128,  # the fake's tokens are characters
        retry_backoff=0.01,
    )


async def test_a_case_insensitive_pattern_reads_no_as_no(
    llama_grader: tuple[LlamaCppFake, str], make_state: Callable[..., RolloutState]
) -> None:
    fake, url = llama_grader
    replying(fake, "No, the student's answer is incorrect. 6 times 7 is actually 42.")  # SmolLM2, vLLM
    (wrong,) = await judge(yes_no(url, r"(?i)^(YES|NO)\b"), make_state("41", "42", Q))
    assert wrong.status == Status.COMPLETED and wrong.reward is not None, wrong.error_msg
    assert wrong.reward["score"] == 0.0 and wrong.reward["verdict"] == "incorrect"
    (strict,) = await judge(yes_no(url, r"^(YES|NO)\b"), make_state("41", "42", Q))
    assert strict.status == Status.FAILED
    assert "matched nothing" in (strict.error_msg or "") and "(?i)" in (strict.error_msg or "")


@pytest.mark.parametrize(
    "reply",
    [
        "No, the student's answer is not yes.",  # says both
        "Is the student's answer correct? Reply YES or NO. I think no.",  # quotes the question
    ],
)
async def test_a_reply_that_says_both_is_never_guessed(
    llama_grader: tuple[LlamaCppFake, str], reply: str, make_state: Callable[..., RolloutState]
) -> None:
    fake, url = llama_grader
    replying(fake, reply)
    (failed,) = await judge(yes_no(url, r"(?i)\b(YES|NO)\b"), make_state("41", "42", Q))
    assert failed.status == Status.FAILED and "the verdicts disagree" in (failed.error_msg or "")


async def test_the_cascade_fails_a_sample_whose_verifier_reply_is_ambiguous(
    llama_grader: tuple[LlamaCppFake, str], make_state: Callable[..., RolloutState]
) -> None:
    fake, url = llama_grader
    replying(fake, "A:\n\nB:\n\nC:")
    config = CascadeJudgerConfig(rule=GSM8KJudgerConfig(), verifier=compass(url))
    right, wrong = await judge(config, make_state("#### 42", "42"), make_state("#### 41", "42"))
    assert right.reward is not None and right.reward["decided_by"] == "rule"
    assert wrong.status == Status.FAILED and "different verdicts" in (wrong.error_msg or "")
