"""The ``restated`` rule: the question's own math boxed as the answer, or the question restated.

"Simplify $\\frac{8}{22}$." has the gold ``\\frac{4}{11}``; ``\\boxed{\\frac{8}{22}}`` equals it in
value and costs the policy nothing: it copied the question. For every bundled MATH problem each
math segment of the prompt (``$...$``, ``$$...$$``, ``\\(...\\)``, ``\\[...\\]``) holding a digit,
and each side of an ``=`` in one, is boxed: not paid, unless it is the gold's own text (an honest
case). The whole question as the response is not paid either: for MATH it holds no committed
answer, and for GSM8K's strict ``####`` nothing in it can be extracted. Honest siblings: the gold
boxed, and for GSM8K the question followed by ``#### gold``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from judger.testing.adversary.cases import NearMiss, boxed, gsm8k_problems, math_problems

RULE = "restated"
_SEGMENT = re.compile(
    r"(?<!\\)\$\$(.+?)(?<!\\)\$\$|(?<!\\)\$(.+?)(?<!\\)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL
)
# an "=" that is not part of \leq, \geq, \neq, <=, >=, !=
_EQUALS = re.compile(r"(?<![<>!\\a-z])=")
MAX_CHARS = 200


def _clean(text: str) -> str:
    return text.strip().rstrip(".,;:?").strip()


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text).replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")


def segments(prompt: str) -> list[str]:
    """The prompt's math segments holding a digit, and the sides of each ``=`` in them, in order,
    without repeats."""
    out: list[str] = []
    for found in _SEGMENT.finditer(prompt):
        whole = _clean(next(g for g in found.groups() if g is not None))
        parts = (
            [whole, *(_clean(side) for side in _EQUALS.split(whole))] if _EQUALS.search(whole) else [whole]
        )
        for part in parts:
            if part and part not in out and re.search(r"\d", part) and len(part) <= MAX_CHARS:
                out.append(part)
    return out


def restated_cases(seed: int = 0) -> Iterator[NearMiss]:
    """The ``restated`` rule's cases (every bundled problem: ``seed`` is unused)."""
    del seed
    for problem in math_problems():
        for part in segments(problem.prompt):
            own = _squash(part) == _squash(problem.gold)
            note = "the gold's own text, as the prompt writes it" if own else "a math segment of the prompt"
            yield NearMiss(RULE, problem.prompt, boxed(part), problem.gold, own, note)
        yield NearMiss(
            RULE, problem.prompt, problem.prompt, problem.gold, False, "the question as the response"
        )
        yield NearMiss(RULE, problem.prompt, boxed(problem.gold), problem.gold, True, "the gold, boxed")
    for problem in gsm8k_problems():
        for response, honest, note in (
            (problem.prompt, False, "the question as the response"),
            (f"{problem.prompt}\n#### {problem.gold}", True, "the question, then the answer"),
        ):
            yield NearMiss(RULE, problem.prompt, response, problem.gold, honest, note, "gsm8k")
