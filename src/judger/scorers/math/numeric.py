"""Plain numeric answers compared without any LaTeX parser.

Most MATH answers are numbers dressed in presentation: ``50\\%``, ``10\\text{ cm}``, ``\\$5``,
``90^\\circ``, ``1,000``. Math-Verify reads them through latex2sympy, whose ANTLR parser depends
on the installed ``antlr4-python3-runtime``; under the 4.9.3 that hydra-core (and so verl) pins,
latex2sympy2_extended 1.11 fails on every percent number. Stripping the presentation here first
makes those verdicts independent of the environment.
"""

from __future__ import annotations

import re
from fractions import Fraction

_UNIT_TEXT = re.compile(r"\\(?:text|textrm|mbox|mathrm)\s*\{\s*[A-Za-z][A-Za-z.\s]*\}")
_PRESENTATION = re.compile(r"\\[,;:! ]|\\left|\\right|\^\{?\\circ\}?|\\\$|\$|[€£¥]|\s+")
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)")
_GROUPED = re.compile(r"[-+]?[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?")  # "0,111" is a decimal comma
_FRAC = re.compile(r"(-?)\\[dt]?frac\{(-?\d+)\}\{(-?\d+)\}")
_LIST_COMMA = re.compile(r",\s+\d")
_SLASH = re.compile(r"(-?\d+)/(\d+)")
# MATH's own thousands separators: "50,\!625", "50{,}625", "50\,625" (a LaTeX space between groups)
_SEPARATOR = re.compile(r"(\d)(?:,\\!|\{,\}|\\,|\\ |,\\,)(?=\d{3}(?!\d))")


def without_separators(text: str) -> str:
    """``text`` with LaTeX thousands separators between digit groups removed: ``50,\\!625`` -> ``50625``.

    These spellings are the label's own statement that the digits form one number: a prompt that
    asks for an order never makes a list of them."""
    return _SEPARATOR.sub(r"\1", text) if "\\" in text or "{,}" in text else text


def _number(text: str) -> Fraction | None:
    if _GROUPED.fullmatch(text):
        text = text.replace(",", "")
    if _NUMBER.fullmatch(text):
        return Fraction(text)
    found = _FRAC.fullmatch(text) or None
    if found is not None:
        den = int(found[3])
        if den == 0:
            return None
        value = Fraction(int(found[2]), den)
        return -value if found[1] else value
    found = _SLASH.fullmatch(text)
    if found is not None and int(found[2]) != 0:
        return Fraction(int(found[1]), int(found[2]))
    return None


def plain_number(text: str) -> tuple[Fraction, bool] | None:
    """``(value, is_percent)`` of an answer that is a number in presentation, else None.

    Presentation is spacing, ``$``, ``\\$``, degrees, thousands separators, a trailing ``\\%`` and a
    trailing unit word in ``\\text{}``. ``50\\%`` gives ``(50, True)``.
    """
    if _LIST_COMMA.search(text):
        return None  # "32, 349" is two numbers, not 32,349
    text = _UNIT_TEXT.sub("", text)
    text = _PRESENTATION.sub("", text)
    percent = text.endswith(("\\%", "%"))
    if percent:
        text = text[:-2] if text.endswith("\\%") else text[:-1]
    if not text:
        return None
    value = _number(text)
    return None if value is None else (value, percent)


def numerically_equal(answer: str, ground_truth: str) -> bool:
    """True when both are plain numbers (:func:`plain_number`) with the same value.

    A percent on either side also matches its value as a fraction (``50\\%`` and ``0.5``), as
    Math-Verify does. False means "not shown equal here", never "different": callers go on to
    Math-Verify then.
    """
    left, right = plain_number(answer), plain_number(ground_truth)
    if left is None or right is None:
        return False
    (a, a_pct), (b, b_pct) = left, right
    if a == b:
        return True
    return (a_pct and a / 100 == b) or (b_pct and b / 100 == a)


_DECIMAL_COMMA = re.compile(r"^(-?\d+),(\d{1,2})$|^(-?0),(\d+)$")
_DECIMAL_POINT = re.compile(r"^-?\d+\.\d+$")


def decimal_comma_equal(answer: str, gold: str) -> bool:
    """``1,22`` against ``1.22``: a comma followed by one or two digits (or any after a lone ``0``) is
    a decimal comma when the other side writes the same number with a decimal point (three digits
    after another number would be a thousands group).
    """
    if len(answer) > 1000 or len(gold) > 1000:
        return False  # no int conversion beyond Python's digit limit
    for comma_side, point_side in ((answer.strip(), gold.strip()), (gold.strip(), answer.strip())):
        found = _DECIMAL_COMMA.match(comma_side)
        if found is not None and _DECIMAL_POINT.match(point_side):
            whole, decimals = (found[1], found[2]) if found[1] else (found[3], found[4])
            return Fraction(f"{whole}.{decimals}") == Fraction(point_side)
    return False
