"""A near miss, the answer formats it is written in, and the bundled data the rules draw from."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Literal

Format = Literal["math", "gsm8k", "dapo", "qa"]
"""How a response states its final answer: ``math`` the last ``\\boxed{}`` (MATH, Math-Verify,
Geometry3K), ``gsm8k`` ``#### N``, ``dapo`` an ``Answer: X`` line, ``qa`` ``<answer>X</answer>``."""

FORMATS: tuple[Format, ...] = ("math", "gsm8k", "dapo", "qa")

NEUTRAL_PROMPT = "Find the value. Please reason step by step, and put your final answer within \\boxed{}."


@dataclass(frozen=True)
class NearMiss:
    """One response a policy could write, and whether a fair grader pays it.

    ``paid_if_honest`` is False for a near miss (an answer the policy can produce without solving
    the problem: it must not be paid) and True for its honest sibling (a right answer in the same
    form: it must be paid, so that a grader paying nothing cannot pass). ``note`` says what the
    case tries, or why an honest case is a judgement call; ``fmt`` is the answer format of
    ``response`` (:data:`Format`).
    """

    rule: str
    prompt: str
    response: str
    gold: str
    paid_if_honest: bool
    note: str = ""
    fmt: Format = "math"


def boxed(answer: str) -> str:
    """A MATH-style final sentence around ``answer``."""
    return f"The answer is $\\boxed{{{answer}}}$."


def answer_line(answer: str) -> str:
    """A DAPO / Minerva-style final line around ``answer``."""
    return f"Reasoning done.\nAnswer: {answer}"


def in_answer_formats(
    rule: str, prompt: str, answer: str, gold: str, honest: bool, note: str = ""
) -> Iterator[NearMiss]:
    """One final answer as MATH (``\\boxed{}``) and as DAPO (``Answer:``) writes it."""
    yield NearMiss(rule, prompt, boxed(answer), gold, honest, note, "math")
    yield NearMiss(rule, prompt, answer_line(answer), gold, honest, note, "dapo")


@dataclass(frozen=True)
class Problem:
    """A bundled problem: its last user turn and its label."""

    prompt: str
    gold: str


@cache
def math_problems() -> tuple[Problem, ...]:
    """The distinct problems of the bundled MATH rollouts (``judger/data/math_rollouts_dev.jsonl``)."""
    seen: dict[str, Problem] = {}
    with (files("judger") / "data" / "math_rollouts_dev.jsonl").open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            prompt = next(t["content"] for t in reversed(row["prompt"]) if t["role"] == "user")
            seen.setdefault(row["uid"], Problem(prompt, str(row["reward_model"]["ground_truth"])))
    return tuple(seen.values())


@cache
def gsm8k_problems(count: int = 12) -> tuple[Problem, ...]:
    """The first ``count`` problems of the bundled GSM8K test set (``judger/data/gsm8k_test.jsonl``)."""
    out = []
    with (files("judger") / "data" / "gsm8k_test.jsonl").open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            out.append(Problem(row["question"], row["answer"].rsplit("####", 1)[1].strip().replace(",", "")))
            if len(out) == count:
                break
    return tuple(out)
