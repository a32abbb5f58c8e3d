"""Answers holding numbers too long to convert: compared as digit strings, never through int().

Python refuses to turn a string of more than 4300 digits into an int (``ValueError: Exceeds the
limit``), and sympy's parser and Math-Verify convert every number they read. A policy that boxes a
5,000-digit number must get a plain verdict, not a failed sample: two such answers are equal when
their canonical digit strings are, and an answer that is not a plain number cannot match one.
"""

from __future__ import annotations

import re

# far below the interpreter's limit (4300): no int conversion downstream may come near it
MAX_DIGITS = 1000
_LONG_RUN = re.compile(rf"\d{{{MAX_DIGITS + 1}}}")
_DECIMAL = re.compile(r"([-+]?)0*(\d*?)(?:\.(\d*?)0*)?")
_PRESENTATION = re.compile(r"\\[,;:! ]|[\s$,]|\\\$")


def has_long_number(text: str) -> bool:
    """True when ``text`` holds a run of more than :data:`MAX_DIGITS` digits."""
    return _LONG_RUN.search(text) is not None


def _canonical(text: str) -> str | None:
    """A plain decimal number as ``sign digits . digits`` without padding zeros, else None."""
    text = _PRESENTATION.sub("", text)
    found = _DECIMAL.fullmatch(text)
    if found is None:
        return None
    whole, fraction = found[2] or "0", found[3] or ""
    sign = "-" if found[1] == "-" and (whole != "0" or fraction) else ""
    return f"{sign}{whole}.{fraction}" if fraction else f"{sign}{whole}"


def long_number_verdict(answer: str, ground_truth: str) -> bool | None:
    """None when neither side holds an over-long number (grade as usual); else whether both are the
    same plain decimal number, compared digit by digit."""
    if not (has_long_number(answer) or has_long_number(ground_truth)):
        return None
    left, right = _canonical(answer), _canonical(ground_truth)
    return left is not None and left == right
