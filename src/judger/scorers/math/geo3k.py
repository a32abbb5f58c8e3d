"""Geometry3K: ``0.9 * accuracy + 0.1 * format`` on ``<think>...</think> ... \\boxed{answer}``.

``format`` is 1.0 when the whole response matches ``<think>.*</think>.*\\boxed\\{.*\\}.*`` (DOTALL);
it is checked here with a few ``str.find`` calls that accept exactly the same strings, because the
regex backtracks quadratically on long responses. ``acc`` grades the last ``\\boxed{}`` content.

- ``compat="verl"``: verl's ``geo3k.compute_score``, which grades with the ``mathruler`` package
  (``extract_boxed_content`` + ``grade_answer``); it must be installed (``pip install mathruler``).
- default: the last ``\\boxed{}`` (brace matched, any form) graded with Math-Verify's equivalence
  (:mod:`judger.scorers.math.grade`), so ``\\frac{\\sqrt{3}}{2}`` equals ``\\sqrt{3}/2`` and ``5.0``
  equals ``5``. Run it on the process pool.

Returns ``{"score", "acc", "pred", "format"}``.
"""

from __future__ import annotations

from typing import Any, Literal

from judger.scorers.committed import committed_text
from judger.scorers.math.boxed import run_answer
from judger.scorers.math.reward import grade_answer
from judger.scorers.math.rounding import Rounding

Compat = Literal["verl"] | None

FORMAT_SCORE = 0.1
_OPEN, _CLOSE, _BOX = "<think>", "</think>", "\\boxed{"


def format_ok(text: str) -> bool:
    """``re.fullmatch(r"<think>.*</think>.*\\\\boxed\\{.*\\}.*", text, re.DOTALL)`` in linear time."""
    if not text.startswith(_OPEN):
        return False
    close = text.find(_CLOSE, len(_OPEN))
    if close < 0:
        return False
    box = text.find(_BOX, close + len(_CLOSE))
    if box < 0:
        return False
    return text.find("}", box + len(_BOX)) >= 0


def _grade_mathruler(solution_str: str, ground_truth: Any, use_boxed: bool) -> tuple[bool, str]:
    try:
        from mathruler.grader import extract_boxed_content, grade_answer
    except ImportError as exc:
        raise ImportError(
            "GEO3K compat='verl' grades with the 'mathruler' package, as verl does: pip install mathruler"
        ) from exc
    answer = extract_boxed_content(solution_str) if use_boxed else solution_str
    return bool(grade_answer(answer, ground_truth)), answer


def compute_score(
    solution_str: Any,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    *,
    compat: Compat = None,
    use_boxed: bool = True,
    format_score: float = FORMAT_SCORE,
    ordered: bool = False,
    rounding: Rounding = None,
    restates_question: bool = False,
) -> dict[str, Any]:
    """Score one response (see the module docstring). ``ordered`` and ``rounding``: what the prompt
    asks for and whether the answer restates it (the judger reads them:
    :mod:`~judger.scorers.math.prompt_facts`), default mode only."""
    if not isinstance(solution_str, str):
        raise TypeError(f"geo3k scorer: the response must be a string, got {type(solution_str).__name__}")
    fmt = 1.0 if format_ok(solution_str) else 0.0
    pred: str | None
    if compat == "verl":
        acc, pred = _grade_mathruler(solution_str, ground_truth, use_boxed)
    elif compat is None:
        committed = committed_text(solution_str)
        pred = run_answer(committed) if use_boxed else committed.strip()
        acc = (
            bool(pred) and not restates_question and grade_answer(str(pred), ground_truth, ordered, rounding)
        )
    else:
        raise ValueError(f"compat must be 'verl' or None, got {compat!r}")
    score = (1.0 - format_score) * (1.0 if acc else 0.0) + format_score * fmt
    return {"score": score, "acc": acc, "pred": pred, "format": fmt}
