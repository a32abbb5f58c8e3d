"""The default mode's checks around Math-Verify: forms it misreads before it, approximations after it.

``before(answer, gold)`` decides what the answer's form decides (an option letter, a clock time, a
power tower, conflicting units) and otherwise hands on the two sides rewritten into forms that
Math-Verify reads right (units the label lacks dropped, ``g(t)=`` names dropped, matrices as
``pmatrix``). ``after(answer, gold)`` runs only where Math-Verify said "not equal": a decimal that
approximates an exact value, a list of such decimals, and complex numbers written with ``i``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from judger.scorers.math.approx import (
    half_unit,
    has_tower,
    rounds_to,
    stated_decimal,
    tower_value,
    values_equal,
    within_stated_precision,
)
from judger.scorers.math.forms import (
    as_pmatrix,
    clock_equal,
    function_bodies,
    matrix_cells,
    mixed_number,
    option_equal,
)
from judger.scorers.math.numeric import plain_number
from judger.scorers.math.rounding import Rounding
from judger.scorers.math.units import unit_sides

Equal = Callable[[str, str], bool]


def split_top(text: str) -> list[str]:
    """``text`` cut at the commas outside any bracket."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


def _unwrap(text: str) -> tuple[str, str]:
    """``(brackets, inside)`` of ``(a, b)`` / ``[a, b]`` / ``\\{a, b\\}``; ``("", text)`` when bare."""
    text = text.strip().replace("\\left", "").replace("\\right", "")
    if text.startswith("\\{") and text.endswith("\\}"):
        return "{}", text[2:-2]
    if len(text) >= 2 and text[0] in "([" and text[-1] in ")]" and split_top(text[1:-1]) != [""]:
        inner = text[1:-1]
        depth = 0
        for ch in inner:  # "(1)(2)" is not one bracketed group
            depth += ch in "([{"
            depth -= ch in ")]}"
            if depth < 0:
                return "", text
        return text[0] + text[-1], inner
    return "", text


def _tower_equal(answer: str, gold: str) -> bool | None:
    a_br, a_in = _unwrap(answer)
    g_br, g_in = _unwrap(gold)
    a_parts, g_parts = split_top(a_in), split_top(g_in)
    a_vals = [tower_value(p) for p in a_parts]
    g_vals = [tower_value(p) for p in g_parts]
    if any(v is None for v in a_vals + g_vals):
        return None
    if a_br != g_br or len(a_vals) != len(g_vals):
        return False
    return all(values_equal(x, y) for x, y in zip(a_vals, g_vals))


def in_order(answer: str, gold: str, equal: Callable[[str, str], bool]) -> bool | None:
    """Two bare comma lists compared position by position (the prompt asked for an order); None otherwise."""
    a_br, a_in = _unwrap(answer)
    g_br, g_in = _unwrap(gold)
    if a_br or g_br:
        return None  # brackets say themselves whether they are ordered
    if plain_number(gold) is not None:
        return None  # "50,625" is a number by the label's own form: the prompt never makes it a list
    a_parts, g_parts = split_top(a_in), split_top(g_in)
    if len(g_parts) < 2:
        return None
    return len(a_parts) == len(g_parts) and all(equal(a, g) for a, g in zip(a_parts, g_parts))


def before(answer: str, gold: str) -> bool | tuple[str, str]:
    """A verdict the forms decide, or the two sides rewritten for the comparisons that follow."""
    for check in (option_equal, clock_equal):
        verdict = check(answer, gold)
        if verdict is not None:
            return verdict
    if has_tower(answer) or has_tower(gold):
        verdict = _tower_equal(answer, gold)
        if verdict is not None:
            return verdict
    sides = unit_sides(answer, gold)
    if isinstance(sides, bool):
        return sides  # units of different dimensions
    answer, gold = sides
    a_mixed, g_mixed = mixed_number(answer), mixed_number(gold)
    if a_mixed is not None or g_mixed is not None:
        a_val = a_mixed if a_mixed is not None else _fraction(answer)
        g_val = g_mixed if g_mixed is not None else _fraction(gold)
        if a_val is not None and g_val is not None:
            return a_val == g_val
    bodies = function_bodies(answer, gold)
    if bodies is not None:
        answer, gold = bodies
    a_cells, g_cells = matrix_cells(answer), matrix_cells(gold)
    if a_cells is not None and g_cells is not None:
        if [len(r) for r in a_cells] != [len(r) for r in g_cells]:
            return False
        answer, gold = as_pmatrix(a_cells), as_pmatrix(g_cells)
    return answer, gold


def _fraction(text: str) -> Fraction | None:
    found = plain_number(text)
    return None if found is None or found[1] else found[0]


def _terminates(value: Fraction) -> bool:
    den = value.denominator
    for p in (2, 5):
        while den % p == 0:
            den //= p
    return den == 1


def _exact(text: str) -> tuple[Any, bool] | None:
    """The real value of an exact answer that is no terminating decimal, and whether it is
    rational (``\\frac{1}{3}``: True, ``7\\pi``: False); None for anything else."""
    plain = _fraction(text)
    if plain is not None:
        if _terminates(plain):
            return None  # a terminating value is compared exactly
        import mpmath  # type: ignore[import-untyped]

        return mpmath.mpf(plain.numerator) / plain.denominator, True
    if stated_decimal(text) is not None or not re.search(r"\\|\^|/|[a-z]", text):
        return None
    from judger.scorers.math.grade import parse_boxed, real_value

    for item in parse_boxed(text):
        value = real_value(item)
        if value is not None:
            rational = bool(getattr(item, "is_rational", False))
            if rational and _terminates(Fraction(int(item.p), int(item.q))):
                return None  # "\\frac12": a terminating value is compared exactly
            return value, rational
    return None


def _approximates(answer: str, gold: str, rounding: Rounding) -> bool:
    """Whether ``answer`` equals ``gold`` by the decimal policy (:mod:`~judger.scorers.math.approx`):
    a decimal label paid for an irrational answer that rounds or truncates to it, or for any value
    that does where the prompt asks for a rounding; a decimal answer paid for an exact label only
    where the prompt asks for a decimal, at the places it asks for."""
    g_dec = stated_decimal(gold)
    a_dec = stated_decimal(answer, 1 if isinstance(rounding, int) else 2)
    if g_dec is not None:
        if a_dec is not None:
            return rounding is not None and a_dec[1] < g_dec[1] and rounds_to(g_dec, a_dec[0])
        exact = _exact(answer)
        if exact is None or (exact[1] and rounding is None):
            return False  # a fraction near a decimal label is an estimate like any other
        return rounds_to(g_dec, exact[0])
    if a_dec is None or rounding is None:
        return False
    if isinstance(rounding, int) and a_dec[1] > half_unit(rounding):
        return False  # fewer places than the prompt asks for
    exact = _exact(gold)
    return exact is not None and within_stated_precision(a_dec, exact[0])


def estimates_exact(answer: str, gold: str) -> bool:
    """Whether ``answer`` is a decimal (or a list holding one) where ``gold`` has an exact value it
    cannot equal as written (``0.111111`` for ``\\frac19``): then the decimal policy alone decides.
    Math-Verify compares numbers rounded to 6 decimals and would pay a 6-digit estimate."""
    a_br, a_in = _unwrap(answer)
    g_br, g_in = _unwrap(gold)
    pairs = zip(split_top(a_in), split_top(g_in)) if a_br == g_br else [(answer, gold)]
    return any(_DECIMAL_TEXT.search(a) and _exact(g) is not None for a, g in pairs)


_DECIMAL_TEXT = re.compile(r"^\s*[-+]?\d*\.\d+")


def _items_equal(a: str, g: str, rounding: Rounding, equal: Equal | None) -> bool:
    if a == g or _approximates(a, g, rounding):
        return True
    x, y = _fraction(a), _fraction(g)
    if x is not None and x == y:
        return True
    # an item that is no estimate is graded as an answer of its own ("\\sqrt{2}" for "\\sqrt2")
    return equal is not None and not estimates_exact(a, g) and equal(a, g)


def plain_verdict(answer: str, gold: str, rounding: Rounding = None) -> bool | None:
    """The verdict on two plain numbers (no percent) that needs no LaTeX parse; None otherwise.

    Equal values, or a decimal that approximates a fraction, are equal; two rationals more than a
    relative 1e-5 apart are unequal under any rounding Math-Verify applies. Closer pairs go on.
    """
    a, g = plain_number(answer), plain_number(gold)
    if a is None or g is None or a[1] or g[1]:
        return None
    if a[0] == g[0] or _approximates(answer, gold, rounding):
        return True
    scale: Fraction = max(Fraction(1), abs(a[0]), abs(g[0]))
    if abs(a[0] - g[0]) > scale / 10**5:
        return False
    return None


def after(answer: str, gold: str, rounding: Rounding = None, equal: Equal | None = None) -> bool:
    """Equal by a decimal approximation (one value or a list, its other items graded by ``equal``)
    or as complex numbers."""
    if _approximates(answer, gold, rounding):
        return True
    a_br, a_in = _unwrap(answer)
    g_br, g_in = _unwrap(gold)
    a_parts, g_parts = split_top(a_in), split_top(g_in)
    if len(a_parts) >= 2 and len(a_parts) == len(g_parts) and a_br == g_br:
        if all(_items_equal(a, g, rounding, equal) for a, g in zip(a_parts, g_parts)):
            return True
        if a_br in ("", "{}"):  # an unordered list: each item matched once, in any order
            left = list(g_parts)
            for a in a_parts:
                hit = next((g for g in left if _items_equal(a, g, rounding, equal)), None)
                if hit is None:
                    return False
                left.remove(hit)
            return True
        return False
    return _complex_equal(answer, gold)


_IMAGINARY = re.compile(r"(?<![a-zA-Z\\])i(?![a-zA-Z])")


def _complex_equal(answer: str, gold: str) -> bool:
    if not (_IMAGINARY.search(answer) and _IMAGINARY.search(gold)):
        return False
    import sympy

    from judger.scorers.math.grade import parse_boxed

    def value(text: str) -> Any:
        for item in parse_boxed(text):
            if isinstance(item, sympy.Basic):
                names = {str(sym): sym for sym in item.free_symbols}
                expr = item.subs(names["i"], sympy.I) if "i" in names else item
                if not expr.free_symbols:
                    return expr
        return None

    a, g = value(answer), value(gold)
    if a is None or g is None:
        return False
    try:
        diff = complex(sympy.N(a - g, 30))
        scale = max(abs(complex(sympy.N(g, 30))), 1.0)
    except (TypeError, ValueError):
        return False
    return abs(diff) <= 1e-12 * scale
