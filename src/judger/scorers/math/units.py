"""Units after a numeric answer: dropped where only one side carries one, else compared by dimension.

Policy (a policy can add, drop or swap a unit at will, so a unit is never what makes an answer
right, and a wrong one always makes it wrong):

- ``5 km`` against a bare ``5``, or a bare ``5`` against ``5 km``: the number decides (a unit on one
  side only is that side's presentation);
- both sides carry a unit: they must have the same dimension (``m/s`` and ``m/s^2`` do not,
  ``cm`` and ``cm^2`` do not: wrong whatever the numbers). Units of the same dimension that the
  grader knows are converted exactly (``25.2 km/h`` = ``7 m/s``, ``12 inches`` = ``1 foot``);
  an unconverted number in another unit (``7 km/h`` for ``7 m/s``) is then a different number.
  Units the grader does not know compare as written (``5 apples`` vs ``5 pears``: wrong).

A unit is the trailing unit expression of an answer whose number part ends in a digit, ``}``
or ``)``: words and symbols in ``\\text{}`` / ``\\mathrm{}`` / ``\\mbox{}``, or bare (then every
symbol must be one the grader knows, or it is one or two words of two letters or more: ``5 x``
is a product), joined by ``/``, ``per``, ``\\cdot`` or spaces, each with an optional power
(``m/s^2``, ``\\text{ cm}^3``, ``\\mathrm{m\\,s^{-1}}``, ``square feet``). Known: SI length,
mass, time, volume, force, energy, power, pressure and frequency units with their prefixes, and
inches, feet, yards, miles, pounds, ounces, minutes, hours, days, weeks, litres, gallons, mph.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

Dimension = tuple[tuple[str, int], ...]

# base units: symbol -> (dimension, factor to SI). Fractions keep conversions exact.
_L, _M, _T = (("L", 1),), (("M", 1),), (("T", 1),)
_SI: dict[str, tuple[Dimension, Fraction]] = {
    "m": (_L, Fraction(1)),
    "g": (_M, Fraction(1, 1000)),
    "s": (_T, Fraction(1)),
    "L": ((("L", 3),), Fraction(1, 1000)),
    "N": ((("L", 1), ("M", 1), ("T", -2)), Fraction(1)),
    "J": ((("L", 2), ("M", 1), ("T", -2)), Fraction(1)),
    "W": ((("L", 2), ("M", 1), ("T", -3)), Fraction(1)),
    "Pa": ((("L", -1), ("M", 1), ("T", -2)), Fraction(1)),
    "Hz": ((("T", -1),), Fraction(1)),
    "eV": ((("L", 2), ("M", 1), ("T", -2)), Fraction(1602176634, 10**28)),
}
_PREFIXES: dict[str, Fraction] = {
    "k": Fraction(1000), "M": Fraction(10**6), "G": Fraction(10**9), "c": Fraction(1, 100),
    "m": Fraction(1, 1000), "μ": Fraction(1, 10**6), "µ": Fraction(1, 10**6), "u": Fraction(1, 10**6),
    "n": Fraction(1, 10**9),
}  # fmt: skip
_MINUTE, _HOUR = Fraction(60), Fraction(3600)
_WORDS: dict[str, tuple[Dimension, Fraction]] = {
    "inch": (_L, Fraction(254, 10000)), "foot": (_L, Fraction(3048, 10000)),
    "yard": (_L, Fraction(9144, 10000)), "mile": (_L, Fraction(1609344, 1000)),
    "pound": (_M, Fraction(45359237, 10**8)), "ounce": (_M, Fraction(45359237, 16 * 10**8)),
    "minute": (_T, _MINUTE), "hour": (_T, _HOUR), "day": (_T, 24 * _HOUR),
    "week": (_T, 7 * 24 * _HOUR), "gallon": ((("L", 3),), Fraction(3785411784, 10**12)),
    "mph": ((("L", 1), ("T", -1)), Fraction(1609344, 1000) / _HOUR),
    "dollar": ((("money", 1),), Fraction(1)), "cent": ((("money", 1),), Fraction(1, 100)),
    "degree": ((("degree", 1),), Fraction(1)), "radian": ((("radian", 1),), Fraction(1)),
}  # fmt: skip
_ALIASES = {
    "inches": "inch", "in": "inch", "feet": "foot", "ft": "foot", "yards": "yard", "yd": "yard",
    "miles": "mile", "mi": "mile", "pounds": "pound", "lb": "pound", "lbs": "pound",
    "ounces": "ounce", "oz": "ounce", "minutes": "minute", "min": "minute", "mins": "minute",
    "hours": "hour", "hr": "hour", "hrs": "hour", "h": "hour", "days": "day", "weeks": "week",
    "gallons": "gallon", "gal": "gallon", "seconds": "s", "second": "s", "sec": "s", "secs": "s",
    "meters": "m", "meter": "m", "metres": "m", "metre": "m", "centimeters": "cm",
    "centimeter": "cm", "centimetres": "cm", "centimetre": "cm", "kilometers": "km",
    "kilometer": "km", "kilometres": "km", "kilometre": "km", "millimeters": "mm",
    "millimeter": "mm", "grams": "g", "gram": "g", "kilograms": "kg", "kilogram": "kg",
    "liters": "L", "liter": "L", "litres": "L", "litre": "L", "l": "L", "ml": "mL",
    "milliliters": "mL", "milliliter": "mL", "newtons": "N", "newton": "N", "joules": "J",
    "joule": "J", "watts": "W", "watt": "W", "pascals": "Pa", "pascal": "Pa", "hertz": "Hz",
    "kph": "km/hour", "dollars": "dollar", "cents": "cent", "degrees": "degree", "deg": "degree",
    "radians": "radian", "rad": "radian",
}  # fmt: skip
"""Spellings of one unit; other words compare as written, less a plural ``s``."""


@dataclass(frozen=True)
class Unit:
    """A unit expression: its canonical text, dimension and factor to SI (1 where unknown)."""

    text: str
    dimension: Dimension
    factor: Fraction


_MACROS = r"\\(?:text|textrm|textnormal|mbox|mathrm|operatorname)\s*"
_BRACED = r"\{((?:[^{}]|\{[^{}]*\})*)\}"
_WRAPPER = re.compile(_MACROS + _BRACED)
_SPACING = re.compile(r"\\[,;:! ]|~|\\(?:q?quad)\b")
_POWER = r"(?:\^\s*\{?\s*(-?\d)\s*\}?)?"
_ATOM = re.compile(rf"([A-Za-zμµ]+)\s*{_POWER}")
_JOINER = re.compile(r"\s*(?:/|\\cdot|\*|·|\bper\b|\s)\s*")
_WORD_POWER = (("square ", 2), ("sq ", 2), ("cubic ", 3))
_TAIL = re.compile(
    rf"(?:\s|\\[,;: ]|~)*((?:(?:{_MACROS}{_BRACED}|[A-Za-zμµ]+|/|\\cdot|\*|·)\s*{_POWER}\s*)+)$"
)
_DEGREES = re.compile(r"\s*(?:\^\s*\{?\s*\\circ\s*\}?|°)\s*$")
_CURRENCY = re.compile(r"^(-?)\s*\\?\$\s*(?=[\d.])")
_DEGREE = Unit("degree", (("degree", 1),), Fraction(1))
_DOLLAR = Unit("dollar", (("money", 1),), Fraction(1))
_NUMBER_END = re.compile(r"[\d})]\s*$")
_TRAILING_SPACE = re.compile(r"(?:\s|\\[,;:! ]|~)+$")


def _unwrap(text: str) -> str:
    previous = None
    while previous != text:
        previous = text
        text = _WRAPPER.sub(r" \1 ", text)
    return _SPACING.sub(" ", text).strip()


def _symbol(name: str) -> tuple[Dimension, Fraction] | None:
    """The dimension and factor of one known unit symbol or word, or None."""
    name = _ALIASES.get(name, _ALIASES.get(name.lower(), name))
    if "/" in name:  # an alias of a compound ("kph")
        unit = parse_unit(name, wrapped=True)
        return None if unit is None or not unit.dimension else (unit.dimension, unit.factor)
    if name in _SI:
        return _SI[name]
    if name.lower() in _WORDS:
        return _WORDS[name.lower()]
    if len(name) >= 2 and name[0] in _PREFIXES and name[1:] in _SI:
        dimension, factor = _SI[name[1:]]
        return dimension, factor * _PREFIXES[name[0]]
    return None


def _word(name: str) -> str:
    """An unknown word's canonical spelling: lower case, singular."""
    name = name.lower()
    return name[:-1] if name.endswith("s") and len(name) > 3 else name


def _combine(parts: list[tuple[Dimension, Fraction, str]]) -> Unit:
    powers: dict[str, int] = {}
    factor = Fraction(1)
    names: list[str] = []
    for dimension, part_factor, name in parts:
        for base, exponent in dimension:
            powers[base] = powers.get(base, 0) + exponent
        factor *= part_factor
        names.append(name)
    dimension = tuple(sorted((b, e) for b, e in powers.items() if e))
    return Unit(" ".join(names), dimension, factor)


def parse_unit(text: str, wrapped: bool) -> Unit | None:
    """A unit expression (``km/h``, ``m s^{-1}``, ``square feet``), or None when ``text`` is none.

    ``wrapped``: it stood in ``\\text{}``-like macros, so any word is a unit; bare text is one only
    when every symbol is known or it is one or two words of two letters or more.
    """
    text = _unwrap(text)
    power = 1
    for word, exponent in _WORD_POWER:
        if text.lower().startswith(word):
            text, power = text[len(word) :], exponent
    if not text:
        return None
    parts: list[tuple[Dimension, Fraction, str]] = []
    sign, pos, known = 1, 0, True
    while pos < len(text):
        joiner = _JOINER.match(text, pos)
        if joiner is not None and joiner.end() > pos:
            if "/" in joiner[0] or "per" in joiner[0]:
                sign = -1  # everything after a "/" is in the denominator
            pos = joiner.end()
            continue
        atom = _ATOM.match(text, pos)
        if atom is None:
            return None
        exponent = int(atom[2] or 1) * sign * (power if not parts else 1)
        found = _symbol(atom[1])
        if found is None:
            known = False
            name = _word(atom[1])
            found = (((f"word:{name}", 1),), Fraction(1))
        dimension = tuple((base, e * exponent) for base, e in found[0])
        parts.append((dimension, found[1] ** exponent, f"{atom[1]}^{exponent}"))
        pos = atom.end()
    if not parts:
        return None
    if not wrapped and len(parts) == 1 and len(text) == 1:
        return None  # a lone bare letter is a variable ("5 m" may be 5m), with a power a unit
    if not wrapped and not known:
        words = [p for p in parts if p[0][0][0].startswith("word:")]
        if len(parts) > 2 or any(len(p[2].split("^")[0]) < 2 for p in words):
            return None
    if len(parts) == 1 and parts[0][2].split("^")[0].lower() in ("and", "or", "pi"):
        return None
    return _combine(parts)


def split_unit(text: str) -> tuple[str, Unit] | None:
    """``(number part, unit)`` of ``5 km`` / ``3\\text{ m}^2`` / ``9.8\\ \\mathrm{m/s^2}`` / ``\\$6`` /
    ``48^\\circ``, else None."""
    text = text.strip().replace("²", "^2").replace("³", "^3")
    found = _DEGREES.search(text)
    if found is not None:
        number = _TRAILING_SPACE.sub("", text[: found.start()])
        return (number, _DEGREE) if _NUMBER_END.search(number) else None
    found = _CURRENCY.match(text)
    if found is not None:
        number = found[1] + text[found.end() :].strip()
        return (number, _DOLLAR) if _NUMBER_END.search(number) else None
    found = _TAIL.search(text)
    if found is None:
        return None
    number = _TRAILING_SPACE.sub("", text[: found.start(1)])
    # a lone letter after a number is a variable ("5 x"), a lone letter with a power may be metres
    if not number or not _NUMBER_END.search(number):
        return None
    tail = found[1]
    unit = parse_unit(tail, wrapped="\\" in tail)
    if unit is None:
        return None
    return number, unit


def unit_sides(answer: str, gold: str) -> bool | tuple[str, str]:
    """The two sides with a unit dropped where only one carries one; False when both carry units
    of different dimensions (or different unknown units); with units of one dimension, the
    answer's number and the gold's number expressed in the answer's unit (``gold_value``)."""
    a, g = split_unit(answer), split_unit(gold)
    if a is None or g is None:
        return (a[0] if a else answer), (g[0] if g else gold)
    (a_number, a_unit), (g_number, g_unit) = a, g
    if a_unit.dimension != g_unit.dimension:
        return False
    if a_unit.factor == g_unit.factor:
        return a_number, g_number
    value = _value(g_number)
    if value is None:
        return False  # another unit, and no exact value to convert: not shown equal
    return a_number, _as_latex(value * g_unit.factor / a_unit.factor)


def units_conflict(answer: str, gold: str) -> bool:
    """True when both sides carry units and they do not name the same quantity: another dimension,
    or another unit whose conversion of the numbers is not exactly equal (``7 km/h``, ``7 m/s``)."""
    a, g = split_unit(answer), split_unit(gold)
    if a is None or g is None:
        return False
    if (a[1].factor, a[1].dimension) == (g[1].factor, g[1].dimension):
        return False
    sides = unit_sides(answer, gold)
    if isinstance(sides, bool):
        return True
    value = _value(sides[0])
    return value is None or sides[1] != _as_latex(value)


def _value(text: str) -> Fraction | None:
    from judger.scorers.math.numeric import plain_number

    found = plain_number(text)
    return None if found is None or found[1] else found[0]


def _as_latex(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    sign = "-" if value < 0 else ""
    return f"{sign}\\frac{{{abs(value.numerator)}}}{{{value.denominator}}}"
