"""The ``decimal`` rule: a decimal approximation of an exact gold, rounded or cut at 1 to 6 digits.

A policy that estimates numerically instead of solving can round any exact value; a grader that
pays ``\\boxed{3.1}`` for ``\\pi`` pays it for not solving. The golds are every irrational or
non-terminating label of the bundled MATH rollouts plus constants and repeating fractions of our
own; each is approximated at 1..6 significant digits, rounded and truncated, and in scientific form
(``3.3 \\times 10^{-2}``) where it is below 0.1, all under a prompt that asks for no decimal.

Honest siblings: the gold in another exact form (``\\frac{2}{18}`` for ``\\dfrac{1}{9}``), a
terminating decimal exactly equal to the gold (``0.375`` for ``\\frac{3}{8}``), an exact answer
when the gold is itself the decimal (``40\\pi`` for ``125.66``), and the right rounding when the
prompt asks for a decimal ("to the nearest hundredth"), where a truncation or another precision
is still a near miss.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import ROUND_DOWN, ROUND_HALF_UP, Decimal
from typing import Any

from judger.testing.adversary.cases import NEUTRAL_PROMPT, NearMiss, in_answer_formats, math_problems

RULE = "decimal"
DIGITS = range(1, 7)
HUNDREDTH_PROMPT = "Find the value. Express your answer as a decimal to the nearest hundredth."

# another exact spelling of each exact gold (rationals get \frac{2p}{2q} without a table entry)
OTHER_EXACT_FORM = {
    "\\pi": "\\frac{2\\pi}{2}", "2\\pi": "\\pi \\cdot 2", "\\frac{\\pi}{4}": "\\pi/4", "e": "e^{1}",
    "\\sqrt{2}": "\\frac{2}{\\sqrt{2}}", "\\frac{\\sqrt{2}}{2}": "\\frac{1}{\\sqrt{2}}",
    "2\\sqrt{2}": "\\sqrt{8}", "\\sqrt{3}": "3^{1/2}", "\\ln 2": "\\ln(2)",
    "\\frac{1+\\sqrt{5}}{2}": "\\frac{\\sqrt{5}+1}{2}", "7\\pi": "\\frac{14\\pi}{2}",
    "\\frac{\\pi}{60}": "\\frac{3\\pi}{180}", "e^{-3}": "\\frac{1}{e^{3}}", "100\\pi": "\\pi \\cdot 100",
}  # fmt: skip
_MIXED = re.compile(r"^-?\d+\s*\\[dt]?frac")


def own_golds() -> list[tuple[str, Any]]:
    """Irrational constants and repeating fractions of our own, with their sympy values."""
    import sympy as sp

    r = sp.Rational
    return [
        ("\\pi", sp.pi), ("2\\pi", 2 * sp.pi), ("\\frac{\\pi}{4}", sp.pi / 4), ("e", sp.E),
        ("\\sqrt{2}", sp.sqrt(2)), ("\\frac{\\sqrt{2}}{2}", sp.sqrt(2) / 2), ("2\\sqrt{2}", 2 * sp.sqrt(2)),
        ("\\sqrt{3}", sp.sqrt(3)), ("\\ln 2", sp.log(2)), ("\\frac{1}{3}", r(1, 3)),
        ("\\frac{2}{3}", r(2, 3)), ("\\frac{1}{7}", r(1, 7)), ("\\frac{5}{6}", r(5, 6)),
        ("\\frac{1+\\sqrt{5}}{2}", (1 + sp.sqrt(5)) / 2), ("100\\pi", 100 * sp.pi),
        # below 0.1: also written in scientific form
        ("\\frac{1}{30}", r(1, 30)), ("\\frac{\\pi}{60}", sp.pi / 60), ("e^{-3}", sp.exp(-3)),
    ]  # fmt: skip


def label_value(label: str) -> Any:
    """The sympy number a bundled label stands for, or None (a symbol, text, a parse failure)."""
    from latex2sympy2_extended import latex2sympy

    try:
        value = latex2sympy(label)
    except Exception:
        return None
    return value if getattr(value, "is_number", False) and not value.free_symbols else None


def is_exact_only(value: Any) -> bool:
    """True for an irrational number or a fraction whose decimal does not terminate."""
    if value.is_rational is False:
        return True
    if not value.is_rational or value.is_integer:
        return False
    q = int(value.q)
    for p in (2, 5):
        while q % p == 0:
            q //= p
    return q != 1


def as_decimal(value: Any) -> Decimal:
    """``value`` to 40 significant digits."""
    return Decimal(str(value.evalf(40)))


def cut(value: Decimal, digits: int, rounding: str) -> Decimal:
    """``value`` at ``digits`` significant digits, rounded (``ROUND_HALF_UP``) or cut (``ROUND_DOWN``)."""
    return value.quantize(Decimal(1).scaleb(value.adjusted() - digits + 1), rounding=rounding)


def plain(value: Decimal) -> str:
    return format(value, "f")


def scientific(value: Decimal) -> str:
    """``3.3 \\times 10^{-2}`` for 0.033."""
    exponent = value.adjusted()
    return f"{plain(value.scaleb(-exponent))} \\times 10^{{{exponent}}}"


def _approximations(value: Decimal) -> Iterator[tuple[str, str]]:
    seen: set[str] = set()
    for digits in DIGITS:
        for rounding, how in ((ROUND_HALF_UP, "rounded"), (ROUND_DOWN, "truncated")):
            approx = cut(value, digits, rounding)
            for text in (plain(approx), *([scientific(approx)] if abs(value) < Decimal("0.1") else [])):
                if text not in seen:
                    seen.add(text)
                    yield text, f"{how} at {digits} significant digits"


def exact_golds() -> list[tuple[str, str, Any]]:
    """``(prompt, gold, value)``: the bundled labels that have no exact decimal, then our own golds."""
    out = []
    for problem in math_problems():
        if _MIXED.match(problem.gold):
            continue
        value = label_value(problem.gold)
        if value is not None and is_exact_only(value):
            out.append((problem.prompt, problem.gold, value))
    out += [(NEUTRAL_PROMPT, gold, value) for gold, value in own_golds()]
    return out


def other_form(prompt: str, gold: str, value: Any) -> str | None:
    """The gold in another exact spelling that the prompt does not hold (``\\frac{8}{22}`` for
    ``\\frac{4}{11}`` would restate "Simplify $\\frac{8}{22}$")."""
    if gold in OTHER_EXACT_FORM:
        return OTHER_EXACT_FORM[gold]
    if not value.is_rational:
        return None
    forms = (f"\\frac{{{k * int(value.p)}}}{{{k * int(value.q)}}}" for k in (2, 3, 5, 7))
    return next((form for form in forms if form not in prompt), None)


def _approximated(prompt: str, gold: str, value: Any) -> Iterator[NearMiss]:
    for text, how in _approximations(as_decimal(value)):
        yield from in_answer_formats(RULE, prompt, text, gold, False, how)
    other = other_form(prompt, gold, value)
    if other is not None:
        yield from in_answer_formats(RULE, prompt, other, gold, True, "the gold in another exact form")


def _asked_for_hundredths(gold: str, value: Any) -> Iterator[NearMiss]:
    """The prompt asks for a decimal: the right rounding is paid; a cut or a coarser one is not."""
    exact = as_decimal(value)
    right = exact.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    yield from in_answer_formats(RULE, HUNDREDTH_PROMPT, plain(right), gold, True, "the rounding asked for")
    cut_down = exact.quantize(Decimal("0.01"), rounding=ROUND_DOWN)
    if cut_down != right:
        yield from in_answer_formats(
            RULE, HUNDREDTH_PROMPT, plain(cut_down), gold, False, "truncated, not rounded"
        )
    tenth = exact.quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)
    if tenth != right:
        yield from in_answer_formats(
            RULE, HUNDREDTH_PROMPT, plain(tenth), gold, False, "to the nearest tenth"
        )


# golds that are decimals, answered exactly: the answer is at least as precise as the label
DECIMAL_GOLDS = (
    (NEUTRAL_PROMPT, "125.66", "40\\pi", "40\\pi rounded to the gold's precision"),
    (NEUTRAL_PROMPT, "125.664", "40\\pi", "40\\pi rounded to the gold's precision"),
    (
        NEUTRAL_PROMPT, "125.663", "40\\pi",
        "40\\pi = 125.66370...: the gold is cut, not rounded; the exact answer is still the right one",
    ),
    ("How long is the diagonal of a square of side 2, to the nearest hundredth?", "2.83", "2\\sqrt{2}",
     "the exact value of a rounded gold"),
    ("What is 1/3 to the nearest hundredth?", "0.33", "\\frac{1}{3}", "the exact value of a rounded gold"),
)  # fmt: skip


def _terminating(gold: str, value: Any) -> str | None:
    """The exact decimal of a terminating fraction label (``0.375`` for ``\\frac{3}{8}``)."""
    if _MIXED.match(gold) or not value.is_rational or value.is_integer or is_exact_only(value):
        return None
    return plain(as_decimal(value).normalize())


def decimal_cases(seed: int = 0) -> Iterator[NearMiss]:
    """The ``decimal`` rule's cases (deterministic: ``seed`` is unused, the grid is complete)."""
    del seed
    golds = exact_golds()
    for prompt, gold, value in golds:
        yield from _approximated(prompt, gold, value)
        yield from _asked_for_hundredths(gold, value)
    for problem in math_problems():
        value = label_value(problem.gold)
        text = None if value is None else _terminating(problem.gold, value)
        if text is not None:
            yield from in_answer_formats(
                RULE, problem.prompt, text, problem.gold, True, "an exactly equal decimal"
            )
    for prompt, gold, answer, note in DECIMAL_GOLDS:
        yield from in_answer_formats(RULE, prompt, answer, gold, True, note)
