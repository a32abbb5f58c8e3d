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
_SINGULAR = {"inches": "inch", "feet": "foot", "foot": "foot", "hours": "hour", "minutes": "minute"}


def split_unit(text: str) -> tuple[str, str] | None:
    """``(number, unit)`` of ``5 km`` / ``3\\text{ m}^2`` / ``7 hours``, else None."""
    found = _UNIT.match(text.strip())
    if found is None:
        return None
    word = (found[2] or found[3] or "").strip()
    if not word or word.lower() in ("and", "or", "pi"):
        return None
    unit = " ".join(word.lower().split())
    unit = _SINGULAR.get(unit, unit[:-1] if unit.endswith("s") and len(unit) > 3 else unit)
    if found[4]:
        unit += "^" + found[4]
    return found[1].strip(), unit


def without_units(answer: str, gold: str) -> tuple[str, str] | None:
    """The two sides with their units removed; None when both carry units and they differ."""
    a, g = split_unit(answer), split_unit(gold)
    if a is not None and g is not None and a[1] != g[1]:
        return None
    return (a[0] if a else answer), (g[0] if g else gold)
