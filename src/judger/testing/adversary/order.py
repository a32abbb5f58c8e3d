"""The ``order`` rule: the right elements of an ordered answer in another order.

A tuple, an ordered pair and an interval are ordered by their form, and a bare list is ordered
when the prompt asks for an order ("in increasing order"); a policy that permutes them, or swaps an
interval's ends, has not solved the problem. A set ``\\{...\\}``, and a bare list where no order is
asked for, are the honest siblings: any permutation is right.

The label's own form comes first: MATH writes thousands with ``,\\!`` (``50,\\!625``, also
``50{,}625`` and ``50\\,625``), a number, not a list, whatever order the prompt asks for. ``50625``
is paid; ``50, 625`` and ``625, 50`` (two numbers) are not.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from itertools import permutations

from judger.testing.adversary.cases import NEUTRAL_PROMPT, NearMiss, in_answer_formats

RULE = "order"
ORDER_PROMPT = "Find all the solutions and list them in increasing order, separated by commas."
LIST_PROMPT = "Find all the solutions. Enter all the solutions, separated by commas."
SEPARATOR_PROMPT = "What is $15^4$? Read its digits in order from left to right."
PERMUTED = "the same elements in another order"


def _permuted(items: list[str], rng: random.Random, limit: int) -> list[list[str]]:
    """Up to ``limit`` orders of ``items`` other than the given one, chosen with ``rng``."""
    others = [list(p) for p in permutations(items) if list(p) != items]
    rng.shuffle(others)
    return others[:limit]


def _tuples(rng: random.Random) -> Iterator[NearMiss]:
    for items in (["3", "-1", "2"], ["1", "2"], ["-2", "0", "5", "7"]):
        gold = "(" + ", ".join(items) + ")"
        for other in _permuted(items, rng, 5):
            yield from in_answer_formats(
                RULE, NEUTRAL_PROMPT, "(" + ", ".join(other) + ")", gold, False, PERMUTED
            )
        for same in ("(" + ",".join(items) + ")", "\\left(" + ", ".join(items) + "\\right)", gold):
            yield from in_answer_formats(RULE, NEUTRAL_PROMPT, same, gold, True, "the same order")


def _intervals() -> Iterator[NearMiss]:
    for gold, wrong, right in (
        ("[1, 5)", ("[5, 1)", "(5, 1]"), ("[1,5)", "\\left[1, 5\\right)")),
        ("(-\\infty, 3]", ("[3, -\\infty)",), ("(-\\infty,3]",)),
    ):
        for answer in wrong:
            yield from in_answer_formats(
                RULE, NEUTRAL_PROMPT, answer, gold, False, "the interval's ends swapped"
            )
        for answer in right:
            yield from in_answer_formats(RULE, NEUTRAL_PROMPT, answer, gold, True, "the same interval")


def _lists(rng: random.Random) -> Iterator[NearMiss]:
    items = ["1", "2", "3"]
    gold = ", ".join(items)
    for other in _permuted(items, rng, 5):
        text = ", ".join(other)
        yield from in_answer_formats(RULE, ORDER_PROMPT, text, gold, False, "the prompt asks for an order")
        yield from in_answer_formats(RULE, LIST_PROMPT, text, gold, True, "no order asked for: a bare list")
        yield from in_answer_formats(
            RULE, LIST_PROMPT, "\\{" + text + "\\}", "\\{" + gold + "\\}", True, "a set: no order"
        )
    for same in (gold, "1,2,3", "1,\\ 2,\\ 3"):
        yield from in_answer_formats(RULE, ORDER_PROMPT, same, gold, True, "the order asked for")


def _separators() -> Iterator[NearMiss]:
    for gold in ("50,\\!625", "50{,}625", "50\\,625"):
        for answer in ("50625", "50,625", "50{,}625", "50,\\!625"):
            yield from in_answer_formats(RULE, SEPARATOR_PROMPT, answer, gold, True, "a thousands separator")
        for answer in ("50, 625", "625, 50", "(50, 625)"):
            yield from in_answer_formats(
                RULE, SEPARATOR_PROMPT, answer, gold, False, "a number read as a list"
            )
    million = "What is $1000^2$? Write the digits in order."
    yield from in_answer_formats(RULE, million, "1000000", "1,\\!000,\\!000", True, "a thousands separator")
    yield from in_answer_formats(
        RULE, million, "1, 000, 000", "1,\\!000,\\!000", False, "a number read as a list"
    )


def order_cases(seed: int = 0) -> Iterator[NearMiss]:
    """The ``order`` rule's cases; ``seed`` picks which permutations are tried."""
    rng = random.Random(seed)
    yield from _tuples(rng)
    yield from _intervals()
    yield from _lists(rng)
    yield from _separators()
