"""Numbers compared by value where exact comparison cannot or should not decide.

- **Decimals against exact values** (the policy; :func:`~judger.scorers.math.forms_verdict.after`
  applies it). A decimal can be produced at will by estimating instead of solving, so it is paid
  for an exact value only on evidence that a decimal is what was asked:

  - a decimal label (``125.663``, two significant digits or more) is paid for an irrational exact
    answer that rounds or truncates to it at the label's last written digit (``40\\pi``: the
    label is then necessarily a rounding); for a rational one (``\\frac{377}{3}``) or a more
    precise decimal (``125.6637``) only where the prompt asks for a rounding
    (:mod:`~judger.scorers.math.rounding`);
  - a decimal answer for an exact label (``2.83`` for ``2\\sqrt{2}``) is paid only where the
    prompt asks for a decimal, when the exact value rounds to it at the answer's last written
    digit, with at least the places the prompt asks for (and two significant digits);
  - a decimal exactly equal (``0.5`` for ``\\frac12``) is always right; an integer is an exact
    claim and never an approximation.
- Power towers (``2^{-2^{1000}}``) are evaluated with mpmath at a bounded precision: its exponents
  are arbitrary-size integers, so such numbers are compared by value within the deadline, where a
  symbolic engine tries to expand them and runs out of time.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

DIGITS = 50
"""Working precision (decimal digits) of the numeric comparisons."""
MAX_DIGITS = 1000
"""Longer numbers are left to the exact comparisons (and Python's int-conversion limit)."""
MAX_EXPONENT_BITS = 4096
"""A power whose exponent exceeds 2**this is not evaluated: its result would not fit in memory."""

_DECIMAL = re.compile(r"^([-+]?)(\d*)\.(\d+)$")
_SCIENTIFIC = re.compile(
    r"^([-+]?\d+(?:\.\d+)?)\s*(?:\\times|\\cdot|\*|x)\s*10\s*\^\s*\{?\s*([-+]?\d+)\s*\}?$|^([-+]?\d+(?:\.\d+)?)[eE]([-+]?\d+)$"
)


def stated_decimal(text: str, min_significant: int = 2) -> tuple[Decimal, Decimal] | None:
    """``(value, half a unit in the last written place)`` of a decimal with ``min_significant``
    significant digits or more (two by default: ``0.3`` for ``\\frac13`` says too little; where the
    prompt names the places, ``0.03`` to the nearest hundredth says what was asked)."""
    text = text.strip().replace(" ", "")
    if len(text) > MAX_DIGITS:
        return None  # no int conversion beyond Python's digit limit
    found = _SCIENTIFIC.match(text)
    if found is not None:
        mantissa, exponent = (found[1], found[2]) if found[1] else (found[3], found[4])
        try:
            m = Decimal(mantissa)
        except InvalidOperation:
            return None
        exp = int(exponent)
        if abs(exp) > 400:
            return None
        digits = len(mantissa.lstrip("+-").replace(".", "").lstrip("0"))
        places = len(mantissa.split(".")[1]) if "." in mantissa else 0
        if digits < min_significant:
            return None
        return m.scaleb(exp), Decimal(5).scaleb(exp - places - 1)
    found = _DECIMAL.match(text)
    if found is None:
        return None
    significant = (found[2] + found[3]).lstrip("0")
    if len(significant) < min_significant:
        return None
    return Decimal(text), Decimal(5).scaleb(-len(found[3]) - 1)


def within_stated_precision(decimal: tuple[Decimal, Decimal], exact: Any) -> bool:
    """Whether ``exact`` (an mpmath/sympy real) rounds to the stated decimal."""
    import mpmath  # type: ignore[import-untyped]

    value, half = decimal
    with mpmath.workdps(DIGITS):
        gap = abs(mpmath.mpf(str(exact)) - mpmath.mpf(str(value)))
        return bool(gap <= mpmath.mpf(str(half)) * (1 + mpmath.mpf(10) ** -12))


def half_unit(places: int) -> Decimal:
    """Half a unit in the ``places``-th decimal place."""
    return Decimal(5).scaleb(-places - 1)


def rounds_to(decimal: tuple[Decimal, Decimal], value: Any) -> bool:
    """Whether ``value`` rounds (half a unit either way) or truncates (a unit towards zero) to the
    stated decimal: labels are written both ways (``125.663`` for ``40\\pi`` = 125.6637...)."""
    import mpmath

    stated, half = decimal
    with mpmath.workdps(DIGITS):
        gap = mpmath.mpf(str(value)) - mpmath.mpf(str(stated))
        unit = mpmath.mpf(str(half)) * 2 * (1 + mpmath.mpf(10) ** -12)
        if abs(gap) <= unit / 2:
            return True
        toward_zero = gap >= 0 if stated >= 0 else gap <= 0
        return bool(toward_zero and abs(gap) < unit)


# --- power towers ---------------------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(\d+(?:\.\d+)?|\\[dt]?frac|\\cdot|\\times|\\left|\\right|[-+*/^{}()\[\]])")


def has_tower(text: str) -> bool:
    """True when an exponent itself holds an exponent (``a^{b^{c}}``, ``a^{-b^c}``)."""
    for found in re.finditer(r"\^\s*\{", text):
        start = found.end()
        if "^" in text[start : start + _closing(text, start)]:
            return True
    return False


def _closing(text: str, start: int) -> int:
    depth = 1
    for i, ch in enumerate(text[start:]):
        depth += ch == "{"
        depth -= ch == "}"
        if depth == 0:
            return i
    return len(text) - start


class _Parser:
    """Numbers, + - * /, ``\\frac``, parentheses and ``^`` (right-associative) evaluated with mpmath."""

    def __init__(self, text: str) -> None:
        self.tokens: list[str] = []
        pos = 0
        text = text.strip()
        while pos < len(text):
            found = _TOKEN.match(text, pos)
            if found is None:
                raise ValueError(text[pos:])
            if found[1] not in ("\\left", "\\right"):
                self.tokens.append(found[1])
            pos = found.end()
        self.i = 0

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise ValueError(f"expected {expected}")
        self.i += 1
        return token

    def expr(self) -> Any:
        value = self.term()
        while self.peek() in ("+", "-"):
            value = value + self.term() if self.take() == "+" else value - self.term()
        return value

    def term(self) -> Any:
        value = self.unary()
        while self.peek() in ("*", "/", "\\cdot", "\\times"):
            value = value / self.unary() if self.take() == "/" else value * self.unary()
        return value

    def unary(self) -> Any:
        if self.peek() == "-":
            self.take()
            return -self.unary()
        if self.peek() == "+":
            self.take()
        return self.power()

    def power(self) -> Any:
        import mpmath

        base = self.atom()
        if self.peek() == "^":
            self.take()
            if self.peek() == "{":
                self.take()
                exponent = self.expr()
                self.take("}")
            else:
                token = self.take()
                exponent = mpmath.mpf(token[0]) if token[0].isdigit() else None
                if exponent is None:
                    raise ValueError("exponent")
                if len(token) > 1:  # "2^10" is 2^1 followed by 0 in LaTeX
                    raise ValueError("ambiguous exponent")
            if mpmath.mag(exponent) > MAX_EXPONENT_BITS:
                raise ValueError("exponent too large to evaluate")
            return mpmath.power(base, exponent)
        return base

    def atom(self) -> Any:
        import mpmath

        token = self.take()
        if token in ("(", "{"):
            value = self.expr()
            self.take(")" if token == "(" else "}")
            return value
        if token.endswith("frac"):
            self.take("{")
            num = self.expr()
            self.take("}")
            self.take("{")
            den = self.expr()
            self.take("}")
            return num / den
        if token[0].isdigit():
            if len(token) > MAX_DIGITS:
                raise ValueError("number too long")
            return mpmath.mpf(token)
        raise ValueError(token)

    def parse(self) -> Any:
        value = self.expr()
        if self.peek() is not None:
            raise ValueError("trailing input")
        return value


def tower_value(text: str) -> Any:
    """The value of a numeric expression with power towers, or None when it is not one."""
    import mpmath

    try:
        with mpmath.workdps(DIGITS):
            return _Parser(text).parse()
    except (ValueError, ZeroDivisionError, OverflowError):
        return None


def values_equal(a: Any, b: Any) -> bool:
    import mpmath

    with mpmath.workdps(DIGITS):
        if a == b:
            return True
        scale = max(abs(a), abs(b))
        return bool(abs(a - b) <= scale * mpmath.mpf(10) ** (5 - DIGITS))
