"""Expressions with huge powers (``(x-a)^{6000}``) compared by value at random points, not expanded.

Math-Verify decides ``(x-a)^{6000}`` against ``(x-a)^{5999}`` by simplifying their difference,
which expands both powers: thousands of terms, past any deadline. Two expressions are the same
function when they agree at points chosen at random (two different polynomials or rational
functions agree only on a set of measure zero), so here both are evaluated at :data:`POINTS`
points: equal everywhere is equal, different anywhere is different.

The values are exact where they can be: each symbol takes a random integer, and a polynomial or
rational expression then evaluates to an exact rational (``(x-a)^{6000}`` at integers is a
3,600-digit integer, computed in microseconds), so ``2^{1000}+1`` is never ``2^{1000}``, however
close in relative terms. Values that are not rational (a root, a logarithm) are compared at
:data:`DIGITS` digits. The points come from a generator seeded by the two texts, so a verdict is
repeatable, and nothing a response can write chooses them. Only answers holding a power above
:data:`HUGE_EXPONENT` come here; everything else keeps Math-Verify's own comparison, and a power
above :data:`EXACT_EXPONENT` is left to it and to the deadline (its exact value would not fit in
memory).
"""

from __future__ import annotations

import random
import re
import zlib
from typing import Any

HUGE_EXPONENT = 200
"""Powers up to this are expanded by Math-Verify within the deadline; above it they are sampled."""
EXACT_EXPONENT = 100_000
POINTS = 4
DIGITS = 60
_EXPONENT = re.compile(r"\^\s*\{?\s*-?\s*(\d+)")


def _exponents(text: str) -> list[int]:
    return [int(n) if len(n) <= 12 else 10**12 for n in _EXPONENT.findall(text)]


def has_huge_power(text: str) -> bool:
    """True when ``text`` raises something to an integer power above :data:`HUGE_EXPONENT`."""
    return any(n > HUGE_EXPONENT for n in _exponents(text))


def _expression(text: str) -> Any:
    import sympy

    from judger.scorers.math.grade import parse_boxed

    for item in parse_boxed(text):
        if isinstance(item, sympy.Expr):
            return item
    return None


def _value(expr: Any, point: dict[Any, Any]) -> Any:
    """``expr`` at ``point``: an exact sympy number, or None where it is undefined there."""
    import sympy

    value = expr.xreplace(point).doit()  # parsed unevaluated: 1 + 2**1000 stays an Add until then
    if value.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo) or value.free_symbols:
        return None
    return value


def _equal(x: Any, y: Any) -> bool:
    import sympy

    if x.is_Rational and y.is_Rational:
        return bool(x == y)
    a, b = sympy.N(x, DIGITS), sympy.N(y, DIGITS)
    scale = max(abs(a), abs(b))
    return bool(scale == 0 or abs(a - b) <= scale * sympy.Float(10) ** (20 - DIGITS))


def huge_power_verdict(answer: str, gold: str) -> bool | None:
    """Whether two expressions with a huge power are equal, by value at random points; None when
    neither side holds one, a power is too large to evaluate exactly, or a side is not an
    expression that can be evaluated so."""
    if not (has_huge_power(answer) or has_huge_power(gold)):
        return None
    if any(n > EXACT_EXPONENT for n in _exponents(answer) + _exponents(gold)):
        return None
    import sympy

    a, g = _expression(answer), _expression(gold)
    if a is None or g is None:
        return None
    symbols = sorted(a.free_symbols | g.free_symbols, key=str)
    rng = random.Random(zlib.crc32(f"{answer}\x00{gold}".encode()))
    compared = 0
    for _ in range(POINTS * 3):  # a point where either side is undefined is replaced
        point = {s: sympy.Integer(rng.randint(2, 1000)) for s in symbols}
        x, y = _value(a, point), _value(g, point)
        if x is None or y is None:
            continue
        if not _equal(x, y):
            return False
        compared += 1
        if compared == POINTS or not symbols:
            return True
    return None
