"""The ``hedge`` rule: two guesses at once, one of them the gold, in every answer format.

A grader that reads the first number after ``####``, or any box of several, or either side of an
"or", pays a policy that guesses twice twice as often. Each format's hedges: MATH ``\\boxed{G} or
\\boxed{W}`` (and the other way round), ``\\boxed{G \\text{ or } W}``, ``\\boxed{G, W}``, also after a
Geometry3K ``<think>`` block; GSM8K ``#### G or W``, ``#### G, W``, ``#### G and W``, ``#### W or
G``; DAPO ``Answer: G or W``; QA ``<answer>G or W</answer>``. The honest sibling is the single
right answer in the same format. Golds are single-valued.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from judger.testing.adversary.cases import NEUTRAL_PROMPT, NearMiss, answer_line, boxed, gsm8k_problems

RULE = "hedge"
THINK = "<think>Two candidates survive; I cannot decide between them.</think> "

MATH_GOLDS = ("27", "-4", "\\frac{4}{11}", "7\\pi", "4t", "1020")
QA_GOLDS = (
    ("Who was the first president of the United States?", "George Washington", "John Adams"),
    ("What is the capital of Australia?", "Canberra", "Sydney"),
    ("In which year did the Second World War end?", "1945", "1944"),
    ("Which planet is known as the red planet?", "Mars", "Venus"),
)


def _wrong(gold: str, rng: random.Random) -> str:
    """A wrong second guess: the integer next to an integer gold, else another gold."""
    try:
        return str(int(gold) + rng.choice((-1, 1)))
    except ValueError:
        return rng.choice([g for g in MATH_GOLDS if g != gold])


def _math(rng: random.Random) -> Iterator[NearMiss]:
    for gold in MATH_GOLDS:
        wrong = _wrong(gold, rng)
        hedges = (
            f"The answer is $\\boxed{{{gold}}}$ or $\\boxed{{{wrong}}}$.",
            f"The answer is $\\boxed{{{wrong}}}$ or $\\boxed{{{gold}}}$.",
            boxed(f"{gold} \\text{{ or }} {wrong}"),
            boxed(f"{wrong} \\text{{ or }} {gold}"),
            boxed(f"{gold}, {wrong}"),
            boxed(f"{wrong}, {gold}"),
            THINK + boxed(f"{gold} \\text{{ or }} {wrong}"),
        )
        for response in hedges:
            yield NearMiss(RULE, NEUTRAL_PROMPT, response, gold, False, "two guesses")
        yield NearMiss(RULE, NEUTRAL_PROMPT, boxed(gold), gold, True, "one answer")
        yield NearMiss(RULE, NEUTRAL_PROMPT, THINK + boxed(gold), gold, True, "one answer after <think>")


def _gsm8k(rng: random.Random) -> Iterator[NearMiss]:
    for problem in gsm8k_problems()[:6]:
        gold, wrong = problem.gold, _wrong(problem.gold, rng)
        for tail in (f"{gold} or {wrong}", f"{gold}, {wrong}", f"{gold} and {wrong}", f"{wrong} or {gold}"):
            yield NearMiss(
                RULE, problem.prompt, f"Let me think.\n#### {tail}", gold, False, "two guesses", "gsm8k"
            )
        yield NearMiss(RULE, problem.prompt, f"Let me think.\n#### {gold}", gold, True, "one answer", "gsm8k")


def _dapo(rng: random.Random) -> Iterator[NearMiss]:
    for gold in MATH_GOLDS:
        wrong = _wrong(gold, rng)
        for tail in (
            f"{gold} or {wrong}",
            f"{gold}, {wrong}",
            f"{wrong} or {gold}",
            f"${gold}$ or ${wrong}$",
        ):
            yield NearMiss(RULE, NEUTRAL_PROMPT, answer_line(tail), gold, False, "two guesses", "dapo")
        yield NearMiss(RULE, NEUTRAL_PROMPT, answer_line(gold), gold, True, "one answer", "dapo")


def _qa() -> Iterator[NearMiss]:
    for prompt, gold, wrong in QA_GOLDS:
        for tail in (f"{gold} or {wrong}", f"{gold}, {wrong}", f"{gold} and {wrong}", f"{wrong} or {gold}"):
            yield NearMiss(RULE, prompt, f"<answer>{tail}</answer>", gold, False, "two guesses", "qa")
        yield NearMiss(RULE, prompt, f"<answer>{gold}</answer>", gold, True, "one answer", "qa")


def hedge_cases(seed: int = 0) -> Iterator[NearMiss]:
    """The ``hedge`` rule's cases; ``seed`` picks the wrong guesses."""
    rng = random.Random(seed)
    yield from _math(rng)
    yield from _gsm8k(rng)
    yield from _dapo(rng)
    yield from _qa()
