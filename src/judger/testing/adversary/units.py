"""The ``unit`` rule: the gold's number with another unit, or a compatible unit left unconverted.

A policy that gets the number right but the quantity wrong (a speed for an acceleration, a length
for an area) or that does not convert (``7 km/h`` for ``7 m/s``) writes the gold's digits with any
unit at no cost. Golds are written as MATH and Minerva write them (``7 \\text{ m/s}``,
``9.8\\ \\mathrm{m/s^2}``, ``4.5 \\mathrm{~km} / \\mathrm{s}``, ``100\\text{ square units}``).

Honest siblings: the value converted to a compatible unit (``25.2 \\text{ km/h}``), the bare number
(the unit is presentation when the number is right), and the same unit spelled otherwise; the last
are marked "spelling" in ``note``: a grader may reasonably not read every spelling.
"""

from __future__ import annotations

from collections.abc import Iterator

from judger.testing.adversary.cases import NearMiss, in_answer_formats

RULE = "unit"
OTHER_DIMENSION = "a unit of another dimension"
UNCONVERTED = "a compatible unit, not converted"
CONVERTED = "converted to a compatible unit"
BARE = "the bare number"
SPELLING = "spelling: the same unit written otherwise"

# (prompt, gold, [(answer, honest, note)])
TABLE: tuple[tuple[str, str, tuple[tuple[str, bool, str], ...]], ...] = (
    ("A runner covers 42 metres in 6 seconds. What is her speed?", "7 \\text{ m/s}", (
        ("7 \\text{ km/h}", False, UNCONVERTED), ("7 \\text{ m/s}^2", False, OTHER_DIMENSION),
        ("7 \\text{ m}", False, OTHER_DIMENSION), ("25.2 \\text{ km/h}", True, CONVERTED),
        ("7", True, BARE), ("7\\ \\mathrm{m\\,s^{-1}}", True, SPELLING),
        ("7 \\text{ meters per second}", True, SPELLING),
    )),
    ("A cart speeds up from rest to 20 m/s in 4 s. What is its acceleration?", "5 \\text{ m/s}^2", (
        ("5 \\text{ m/s}", False, OTHER_DIMENSION), ("5 \\text{ cm/s}^2", False, UNCONVERTED),
        ("500 \\text{ cm/s}^2", True, CONVERTED), ("5", True, BARE), ("5\\ \\mathrm{m/s^2}", True, SPELLING),
    )),
    ("What is the acceleration due to gravity at the Earth's surface?", "9.8\\ \\mathrm{m/s^2}", (
        ("9.8\\ \\mathrm{m/s}", False, OTHER_DIMENSION), ("9.8 \\text{ m/s}", False, OTHER_DIMENSION),
        ("9.8 \\text{ ft/s}^2", False, UNCONVERTED), ("9.8", True, BARE),
        ("9.8 \\text{ m/s}^2", True, SPELLING),
    )),
    ("A trail is 3000 metres long. How long is it in kilometres?", "3\\text{ km}", (
        ("3\\text{ m}", False, UNCONVERTED), ("3 \\text{ km/h}", False, OTHER_DIMENSION),
        ("3\\text{ mi}", False, UNCONVERTED), ("3000\\text{ m}", True, CONVERTED), ("3", True, BARE),
    )),
    ("A car drives 120 km in 2 hours. What is its average speed?", "60 \\text{ km/h}", (
        ("60 \\text{ km}", False, OTHER_DIMENSION), ("60 \\text{ m/s}", False, UNCONVERTED),
        ("60 \\text{ mph}", False, UNCONVERTED), ("60", True, BARE),
        ("60 \\text{ kilometers per hour}", True, SPELLING),
    )),
    ("What is the area of a 3 cm by 4 cm rectangle?", "12 \\text{ cm}^2", (
        ("12 \\text{ cm}", False, OTHER_DIMENSION), ("12 \\text{ m}^2", False, UNCONVERTED),
        ("12 \\text{ cm}^3", False, OTHER_DIMENSION), ("1200 \\text{ mm}^2", True, CONVERTED),
        ("12", True, BARE), ("12 \\text{ square centimeters}", True, SPELLING),
    )),
    (
        "What is the area, in square units, of an isosceles right triangle with a hypotenuse of 20 units?",
        "100\\text{ square units}",
        (
            ("100\\text{ units}", False, OTHER_DIMENSION), ("100", True, BARE),
            ("100 \\text{ units}^2", True, SPELLING),
        ),
    ),
    ("A film lasts 120 minutes. How long is it in hours?", "2\\text{ hours}", (
        ("2\\text{ minutes}", False, UNCONVERTED), ("2\\text{ days}", False, UNCONVERTED),
        ("120\\text{ minutes}", True, CONVERTED), ("2", True, BARE), ("2 \\text{ hr}", True, SPELLING),
    )),
    ("A rope of 10 m is cut in half. How long is each piece?", "5 \\text{ m}", (
        ("5 \\text{ cm}", False, UNCONVERTED), ("5 \\text{ km}", False, UNCONVERTED),
        ("5 \\text{ m}^2", False, OTHER_DIMENSION), ("500 \\text{ cm}", True, CONVERTED), ("5", True, BARE),
        ("5 \\text{ meters}", True, SPELLING),
    )),
    ("A board is 4 yards long. How long is it in feet?", "12 \\text{ feet}", (
        ("12 \\text{ inches}", False, UNCONVERTED), ("12 \\text{ yards}", False, UNCONVERTED),
        ("144 \\text{ inches}", True, CONVERTED), ("4 \\text{ yards}", True, CONVERTED), ("12", True, BARE),
        ("12 \\text{ ft}", True, SPELLING),
    )),
    ("Find the orbital speed of the star.", "4.5 \\mathrm{~km} / \\mathrm{s}", (
        ("4.5 \\mathrm{~m} / \\mathrm{s}", False, UNCONVERTED), ("4.5 \\mathrm{~km}", False, OTHER_DIMENSION),
        ("4500 \\mathrm{~m} / \\mathrm{s}", True, CONVERTED), ("4.5", True, BARE),
    )),
    ("Find the wavelength of the emitted photon.", "0.5 \\mathrm{~cm}", (
        ("0.5 \\mathrm{~m}", False, UNCONVERTED), ("0.5 \\mathrm{~cm}^{2}", False, OTHER_DIMENSION),
        ("5 \\mathrm{~mm}", True, CONVERTED), ("0.5", True, BARE),
    )),
    ("Carla spent two-fifths of her savings and had $\\$ 9$ left. How many dollars did she spend?", "\\$6", (
        ("6 \\text{ cents}", False, UNCONVERTED), ("600 \\text{ cents}", True, CONVERTED), ("6", True, BARE),
        ("6 \\text{ dollars}", True, SPELLING),
    )),
    ("What is the measure of each angle of an equilateral triangle?", "60^\\circ", (
        ("60 \\text{ radians}", False, UNCONVERTED), ("60", True, BARE),
        ("60 \\text{ degrees}", True, SPELLING),
    )),
)  # fmt: skip


def unit_cases(seed: int = 0) -> Iterator[NearMiss]:
    """The ``unit`` rule's cases (the table is complete: ``seed`` is unused)."""
    del seed
    for prompt, gold, answers in TABLE:
        for answer, honest, note in answers:
            yield from in_answer_formats(RULE, prompt, answer, gold, honest, note)
