"""Units after a numeric answer: stripped where the label carries none, compared where both carry one.

Policy: ``5 km`` against a bare ``5`` is the number 5 (the unit is the answer's presentation);
``5 km`` against ``5 m`` is wrong (the units conflict, whatever the numbers); a bare ``5`` against
``5 km`` is right (the label's unit is presentation too). A unit is a trailing word in
``\\text{}``/``\\mbox{}``/``\\mathrm{}`` or a bare word of two or more letters, after a number, with an
optional power (``m^2``, ``\\text{ cm}^3``); one-letter bare words are left alone (``5 x`` is a
product), except metres with a power (``3 m^2``).
"""

from __future__ import annotations

import re

_NUMBERISH = r"[-+]?(?:\\\$|\$)?\s*(?:\d[\d,]*(?:\.\d*)?|\.\d+|\\[dt]?frac\{\d+\}\{\d+\})"
_WRAPPED = r"\\(?:text|textrm|textnormal|mbox|mathrm)\s*\{\s*([A-Za-z][A-Za-z.\s]*?)\s*\}"
_POWER = r"(?:\s*\^\s*\{?\s*(\d)\s*\}?)?"
_BARE = r"([A-Za-z]{2,}(?:\s+[A-Za-z]{2,})?|m(?=\s*\^))"
_UNIT = re.compile(rf"^({_NUMBERISH})\s*(?:\\[,;: ]\s*)*(?:{_WRAPPED}|{_BARE}){_POWER}$")
_ALIASES = {
    "inches": "inch", "in": "inch", "feet": "foot", "ft": "foot", "hours": "hour", "hr": "hour",
    "hrs": "hour", "minutes": "minute", "min": "minute", "mins": "minute", "seconds": "second",
    "sec": "second", "secs": "second", "meters": "m", "meter": "m", "metres": "m", "metre": "m",
    "centimeters": "cm", "centimeter": "cm", "kilometers": "km", "kilometer": "km",
    "millimeters": "mm", "millimeter": "mm", "miles": "mile", "mi": "mile", "yards": "yard",
    "yd": "yard", "grams": "g", "gram": "g", "kilograms": "kg", "kilogram": "kg", "liters": "l",
    "liter": "l", "litres": "l", "litre": "l", "pounds": "pound", "lb": "pound", "lbs": "pound",
}  # fmt: skip
"""Spellings of one unit; others compare as written, less a plural ``s``."""


def _canonical(unit: str) -> str:
    """``square centimeters`` -> ``cm^2``, ``Hours`` -> ``hour``, ``cubic feet`` -> ``foot^3``."""
    power = ""
    for word, exponent in (("square ", "^2"), ("sq ", "^2"), ("cubic ", "^3")):
        if unit.startswith(word):
            unit, power = unit[len(word) :], exponent
    if unit in _ALIASES:
        unit = _ALIASES[unit]
    elif unit.endswith("s") and len(unit) > 3:
        unit = unit[:-1]
    return unit + power


def split_unit(text: str) -> tuple[str, str] | None:
    """``(number, unit)`` of ``5 km`` / ``3\\text{ m}^2`` / ``7 hours``, else None."""
    found = _UNIT.match(text.strip())
    if found is None:
        return None
    word = (found[2] or found[3] or "").strip()
    if not word or word.lower() in ("and", "or", "pi"):
        return None
    unit = _canonical(" ".join(word.lower().split()))
    if found[4] and "^" not in unit:
        unit += "^" + found[4]
    return found[1].strip(), unit


def without_units(answer: str, gold: str) -> tuple[str, str] | None:
    """The two sides with their units removed; None when both carry units and they differ."""
    a, g = split_unit(answer), split_unit(gold)
    if a is not None and g is not None and a[1] != g[1]:
        return None
    return (a[0] if a else answer), (g[0] if g else gold)
