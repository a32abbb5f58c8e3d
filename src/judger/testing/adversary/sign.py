"""The ``sign`` rule: the gold negated, or both signs at once (``\\pm``).

A grader that compares magnitudes, drops a leading minus, or reads ``\\pm G`` as ``G`` pays a
policy for not finding the sign. Golds: every nonzero label of the bundled MATH rollouts that is
not text, and the exact golds of the ``decimal`` rule. The honest sibling is the gold as written.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from judger.testing.adversary.cases import NearMiss, in_answer_formats, math_problems
from judger.testing.adversary.decimals import NEUTRAL_PROMPT, own_golds

RULE = "sign"
_ZERO = re.compile(r"^[-+]?0+(?:\.0*)?$")


def _operand(gold: str) -> str:
    """``G``, or ``(G)`` where a sign before it would bind to its first term only (``4a-2``)."""
    return f"({gold})" if re.search(r"[\w}]\s*[-+]", gold) else gold


def negated(gold: str) -> str:
    """``-G`` (``-(G)`` for a sum), or ``G`` without its leading minus."""
    return gold[1:] if gold.startswith("-") else "-" + _operand(gold)


def signable(gold: str) -> bool:
    """A nonzero label that is not a sentence or a clock time in text."""
    return not (_ZERO.match(gold) or gold.startswith("\\text") or ":" in gold)


def sign_cases(seed: int = 0) -> Iterator[NearMiss]:
    """The ``sign`` rule's cases (every gold is tried: ``seed`` is unused)."""
    del seed
    golds = [(p.prompt, p.gold) for p in math_problems()] + [(NEUTRAL_PROMPT, g) for g, _ in own_golds()]
    seen: set[str] = set()
    for prompt, gold in golds:
        if gold in seen or not signable(gold):
            continue
        seen.add(gold)
        yield from in_answer_formats(RULE, prompt, negated(gold), gold, False, "the gold negated")
        if not gold.startswith("-"):
            yield from in_answer_formats(RULE, prompt, "\\pm " + _operand(gold), gold, False, "both signs")
        yield from in_answer_formats(RULE, prompt, gold, gold, True, "the gold as written")
