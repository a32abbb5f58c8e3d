"""Expressions with huge powers (``(x-a)^{6000}``) compared by value at random points, not expanded.

Math-Verify decides ``(x-a)^{6000}`` against ``(x-a)^{5999}`` by simplifying their difference,
which expands both powers: thousands of terms, past any deadline. Two expressions are the same
function when they agree at points chosen at random (two different polynomials or rational
functions agree only on a set of measure zero), so here both are evaluated with mpmath at
:data:`POINTS` points, at :data:`DIGITS` digits: equal everywhere is equal, different anywhere is
different. The points come from a generator seeded by the two texts, so a verdict is repeatable,
and nothing a response can write chooses them. Only answers holding a power above
:data:`HUGE_EXPONENT` come here; everything else keeps Math-Verify's own comparison.
"""

from __future__ import annotations

import random
import re
import zlib
from typing import Any

HUGE_EXPONENT = 200
"""Powers up to this are expanded by Math-Verify within the deadline; above it they are sampled."""
POINTS = 4
DIGITS = 60
_EXPONENT = re.compile(r"\^\s*\{?\s*-?\s*(\d+)")


def has_huge_power(text: str) -> bool:
    """True when ``text`` raises something to an integer power above :data:`HUGE_EXPONENT`."""
    return any(len(n) > 6 or int(n) > HUGE_EXPONENT for n in _EXPONENT.findall(text))


def _expression(text: str) -> Any:
    import sympy

    from judger.scorers.math.grade import parse_boxed

    for item in parse_boxed(text):
        if isinstance(item, sympy.Expr):
            return item
    return None


def _values(expr: Any, symbols: list[Any], points: list[list[Any]]) -> list[Any] | None:
    import mpmath  # type: ignore[import-untyped]
    import sympy

    try:
        fn = sympy.lambdify(symbols, expr, "mpmath")
        with mpmath.workdps(DIGITS):
            return [mpmath.mpc(fn(*point)) for point in points]
    except (TypeError, ValueError, ZeroDivisionError, OverflowError, NameError, AttributeError):
        return None


def huge_power_verdict(answer: str, gold: str) -> bool | None:
    """Whether two expressions with a huge power are equal, by value at random points; None when
    neither side holds one, or a side is not an expression that can be evaluated so."""
    if not (has_huge_power(answer) or has_huge_power(gold)):
        return None
    import mpmath

    a, g = _expression(answer), _expression(gold)
    if a is None or g is None:
        return None
    symbols = sorted(a.free_symbols | g.free_symbols, key=str)
    rng = random.Random(zlib.crc32(f"{answer}\x00{gold}".encode()))
    with mpmath.workdps(DIGITS):
        points = [[mpmath.mpf(rng.uniform(0.1, 2.0)) for _ in symbols] for _ in range(POINTS)]
    a_values, g_values = _values(a, symbols, points), _values(g, symbols, points)
    if a_values is None or g_values is None:
        return None
    with mpmath.workdps(DIGITS):
        tolerance = mpmath.mpf(10) ** (20 - DIGITS)
        for x, y in zip(a_values, g_values):
            scale = max(abs(x), abs(y))
            if scale != 0 and abs(x - y) > tolerance * scale:
                return False
    return True
