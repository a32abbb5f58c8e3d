"""MATH / MATH-500 style answers.

- ``compat="verl"``: verl's ``math_reward`` exactly. The answer is the last ``\\boxed{...}`` (brace
  matched; or the text after the last ``\\boxed `` up to ``$``), both sides go through
  :func:`~judger.scorers.math.strip.strip_string` and must then be equal strings. ``\\fbox{}``
  answers score 0, as in verl.
- default: the answer is the last box of the committed text (outside ``<think>`` reasoning), whatever
  its form (``\\fbox``, ``\\boxed 5``), a sentence-final period inside it ignored (``\\boxed{72.}``);
  without a box, a final answer the response states (``The answer is $\\frac12$``,
  :mod:`~judger.scorers.math.stated`; ``unboxed=False`` turns this off). Equality is
  Math-Verify's symbolic and numeric equivalence (:mod:`judger.scorers.math.grade`), so ``5.0``
  equals ``5``, ``\\frac{\\pi}{2}`` equals ``\\pi/2`` and ``0.75`` equals ``\\frac34``, without
  Math-Verify's tiny-number false positive. Around Math-Verify, the forms it misreads
  (:mod:`~judger.scorers.math.forms_verdict`): units (by dimension, converted), option letters,
  clock times, mixed numbers, matrices, ``g(t)=`` names, decimals (paid for an exact value only on
  evidence: :mod:`~judger.scorers.math.approx`), complex numbers, power towers and huge powers by
  value; LaTeX thousands separators in a label (``50,\\!625``) make one number; a run of boxes
  ending the response is one list (:func:`~judger.scorers.math.boxed.final_boxes`), a bare list is
  ordered when the prompt asks for an order, and an expression copied from the question is no
  answer. It can take unbounded time on hostile input (``9^{9^{9^9}}``), so it belongs on the
  process pool.

Both return ``{"score": 1.0 | 0.0, "acc": bool, "pred": str | None}``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Literal

from judger.scorers.committed import committed_text
from judger.scorers.labels import missing_label
from judger.scorers.math import forms_verdict
from judger.scorers.math.approx import has_tower
from judger.scorers.math.boxed import (
    BOXED,
    clean_answer,
    final_answer,
    final_boxes,
    last_boxed,
    last_boxed_only_string_verl,
    remove_boxed_verl,
)
from judger.scorers.math.forms import gold_answers, strip_noise
from judger.scorers.math.grade import equivalent
from judger.scorers.math.huge import long_number_verdict
from judger.scorers.math.numeric import decimal_comma_equal, numerically_equal, without_separators
from judger.scorers.math.powers import huge_power_verdict
from judger.scorers.math.rounding import Rounding
from judger.scorers.math.stated import stated_answer
from judger.scorers.math.strip import is_equiv_verl

Compat = Literal["verl"] | None


def _result(acc: bool, pred: str | None) -> dict[str, Any]:
    return {"score": 1.0 if acc else 0.0, "acc": acc, "pred": pred}


def compute_score_verl(solution_str: Any, ground_truth: Any) -> dict[str, Any]:
    """verl's ``math_reward.compute_score``, as a dict: any error scores 0, as verl's does."""
    try:
        boxed = last_boxed_only_string_verl(solution_str)
        if boxed is None:
            return _result(False, None)
        answer = remove_boxed_verl(boxed)
    except Exception:
        return _result(False, None)
    return _result(is_equiv_verl(answer, ground_truth), answer)


def ground_truth_text(ground_truth: Any) -> str:
    """A label as answer text: numbers as written, a ``\\boxed{}`` label unwrapped."""
    text = gold_answers(str(ground_truth).strip())
    if "\\boxed" in text or "\\fbox" in text:
        inner = last_boxed(text)
        if inner is not None:
            return without_separators(inner)
    return without_separators(text)


_TEXT_MACRO = re.compile(r"\\(?:text|textbf|textrm|mathrm|mbox)\s*\{([^{}]*)\}")
_THIN_SPACE = re.compile(r"\\[,;:! ]")


def markup_free(text: str) -> str:
    """``text`` minus text wrappers, LaTeX spacing and whitespace: ``4:30 \\text{ p.m.}`` -> ``4:30p.m.``.

    Only presentation goes: the characters of the answer stay, in order and in case, so two answers
    equal under this are the same answer written differently.
    """
    previous = None
    while previous != text:
        previous = text
        text = _TEXT_MACRO.sub(r"\1", text)
    text = _THIN_SPACE.sub("", text).replace("\\left", "").replace("\\right", "")
    return "".join(text.split()).strip("$")


# plain-text relations as models type them ("x <= 2"): the LaTeX parser reads only the macros
_RELATION_MACROS = {"<=": "\\leq ", ">=": "\\geq ", "!=": "\\neq "}
_RELATIONS = re.compile(r"<=|>=|!=")


def grade_answer(answer: str, ground_truth: Any, ordered: bool = False, rounding: Rounding = None) -> bool:
    """Our equivalence of an extracted answer and a label.

    Identical text, then identical text once LaTeX presentation is removed (Math-Verify cannot
    parse ``\\text{4:30 p.m.}``), then equal plain numbers (``50\\%``, ``10\\text{ cm}``:
    :mod:`~judger.scorers.math.numeric`, no LaTeX parser involved), then Math-Verify's symbolic and
    numeric equivalence (huge powers by value: :mod:`~judger.scorers.math.powers`). ``ordered``:
    the prompt asks for an order, so a bare comma list is compared position by position
    (:mod:`~judger.scorers.math.order`); ``rounding``: the decimal the prompt asks for, the
    evidence the decimal policy needs (:mod:`~judger.scorers.math.approx`).
    """
    sides = parser_free_verdict(answer, ground_truth, ordered, rounding)
    if isinstance(sides, bool):
        return sides
    answer, gold = sides
    verdict = huge_power_verdict(answer, gold)
    if verdict is not None:
        return verdict

    def each(a: str, g: str) -> bool:
        return grade_answer(a, g, rounding=rounding)

    if forms_verdict.estimates_exact(answer, gold):
        return forms_verdict.after(answer, gold, rounding, each)
    return equivalent(answer, gold) or forms_verdict.after(answer, gold, rounding, each)


def parser_free_verdict(
    answer: str, ground_truth: Any, ordered: bool = False, rounding: Rounding = None
) -> bool | tuple[str, str]:
    """:func:`grade_answer` up to the LaTeX parser: its verdict where the forms and plain numbers
    decide, else the two sides (rewritten by the forms) that Math-Verify compares.

    With ``ordered=False`` nothing here parses LaTeX, and on bounded text without a power tower
    (which :func:`quick_result` screens out) nothing here can run long: verl's per-sample path runs
    it in the calling process. A check that parses or evaluates belongs after it.
    """
    gold = ground_truth_text(ground_truth)
    if answer == gold:
        return True
    answer = _RELATIONS.sub(
        lambda m: _RELATION_MACROS[m[0]], without_separators(strip_noise(clean_answer(answer)))
    )
    if not answer:
        return False
    if answer == gold:
        return True
    plain = markup_free(answer)
    if plain and plain == markup_free(gold):
        return True
    verdict = long_number_verdict(answer, gold)  # converting such a number raises
    if verdict is not None:
        return verdict
    if ordered:
        verdict = forms_verdict.in_order(answer, gold, lambda a, g: grade_answer(a, g, rounding=rounding))
        if verdict is not None:
            return verdict
    sides = forms_verdict.before(answer, gold)
    if isinstance(sides, bool):
        return sides
    answer, gold = sides
    if numerically_equal(answer, gold) or decimal_comma_equal(answer, gold):  # no LaTeX parser needed
        return True
    verdict = forms_verdict.plain_verdict(answer, gold, rounding)
    if verdict is not None:
        return verdict
    return answer, gold


def compute_score(
    solution_str: Any,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    *,
    compat: Compat = None,
    extracted: bool = False,
    boxes: tuple[str, ...] | None = None,
    ordered: bool = False,
    rounding: Rounding = None,
    restates_question: bool = False,
    unboxed: bool = True,
) -> dict[str, Any]:
    """Score one response against a MATH label (see the module docstring for the two modes).

    ``extracted=True`` says ``solution_str`` is already the answer (or None): the judger extracts
    in the calling process so that identical answers are graded once per batch. ``boxes``: the
    run of boxes that ends the response (``\\boxed{1} and \\boxed{2}``), when there are several:
    holding two different answers, it is graded as their list, never as its last box (two guesses
    are not one answer). The judger reads three facts from the prompt: ``ordered``, it asks for
    the answers in an order; ``rounding``, it asks for a decimal (:mod:`~judger.scorers.math.rounding`);
    ``restates_question``, the answer is an expression copied from it (graded wrong:
    :mod:`~judger.scorers.math.restated`). ``unboxed``: without a box, read a final answer the
    response states (:mod:`~judger.scorers.math.stated`); False keeps the box a format
    requirement.
    """
    if compat == "verl":
        return compute_score_verl(solution_str, ground_truth)
    if compat is not None:
        raise ValueError(f"compat must be 'verl' or None, got {compat!r}")
    if ground_truth is None:
        raise missing_label("math scorer")
    if extracted:
        answer = solution_str
    else:
        answer, boxes = extract(solution_str, unboxed)
    if not answer:
        return _result(False, answer or None)
    if restates_question:
        return _result(False, answer)
    if boxes and len(set(boxes)) >= 2:
        joined = ", ".join(boxes)
        return _result(grade_answer(joined, ground_truth, ordered, rounding), joined)
    return _result(grade_answer(answer, ground_truth, ordered, rounding), answer)


def extract(solution_str: Any, unboxed: bool = True) -> tuple[str | None, tuple[str, ...] | None]:
    """The default mode's answer of a response and, where several boxes end it and the answer is
    the last of them, that run of boxes (see :func:`compute_score`). Only the committed text counts
    (:mod:`judger.scorers.committed`): a box inside ``<think>`` reasoning is no answer."""
    if not isinstance(solution_str, str):
        return None, None
    text = committed_text(solution_str)
    answer = final_answer(text)
    if answer is None:
        return (stated_answer(text) if unboxed else None), None
    boxes = None
    if text.count(BOXED) >= 2 and answer == last_boxed(text):
        boxes = tuple(final_boxes(text))
    return answer, boxes


def unboxed_source(solution_str: Any) -> str | None:
    """The committed text of a response without a box: where :func:`extract` reads a stated answer
    (which must not be the question restated: :func:`~judger.scorers.math.restated.copies_question`)."""
    if not isinstance(solution_str, str):
        return None
    text = committed_text(solution_str)
    return text if final_answer(text) is None else None


_CANONICAL_INT = re.compile(r"0|-?[1-9][0-9]{0,30}")
INLINE_MAX_CHARS = 100
"""Longest answer or label :func:`quick_result` grades itself; longer ones go to the full grader."""


def trivial_result(answer: str | None, gold: str) -> dict[str, Any] | None:
    """The result no grading policy could differ on: no answer, the label's own text, or two
    different integers in canonical form. None: it needs the forms or the parser."""
    if not answer:
        return _result(False, None)
    if answer == gold:
        return _result(True, answer)
    if _CANONICAL_INT.fullmatch(answer) and _CANONICAL_INT.fullmatch(gold):
        return _result(False, answer)
    return None


def quick_result(answer: str | None, ground_truth: Any) -> dict[str, Any] | None:
    """The default mode's result for an extracted answer where no LaTeX parser is needed, decided in
    the calling process with the full grader's own checks (:func:`parser_free_verdict`): no answer,
    the label's own text, two different integers in canonical form, and on short text without a
    power tower the forms and plain numbers (``\\dfrac{1}{9}``, ``48^\\circ``, ``12\\frac{3}{5}``,
    ``\\$6``). None: grade it in full (on the process pool, under its deadline). A run of boxes
    ending the response may still be a list: the caller trusts a False here only without one.
    """
    gold = str(ground_truth).strip()
    trivial = trivial_result(answer, gold)
    if trivial is not None or not answer:
        return trivial
    if len(answer) > INLINE_MAX_CHARS or len(gold) > INLINE_MAX_CHARS:
        return None
    verdict = _inline_verdict(answer, gold)
    return None if verdict is None else _result(verdict, answer)


@lru_cache(maxsize=4096)
def _inline_verdict(answer: str, gold: str) -> bool | None:
    # memoised: a group of responses to one prompt repeats its answers; both sides are short text
    if has_tower(answer) or has_tower(gold):
        return None  # evaluating a tower can take unbounded time: the pool's deadline covers it
    verdict = parser_free_verdict(answer, gold)
    return verdict if isinstance(verdict, bool) else None
