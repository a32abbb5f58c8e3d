"""Math-Verify's ``parse`` + ``verify`` with its recommended reward settings.

The label is wrapped as ``\\boxed{label}`` and parsed with LaTeX extraction; the response is
parsed with LaTeX and plain-expression extraction; the score is 1.0 if the parsed prediction
verifies against the parsed gold (gold first), else 0.0.

- ``compat="verl"``: verl's ``math_verify.compute_score`` (0.9) exactly: ``parse`` and ``verify``
  with Math-Verify's own ``signal.alarm`` timeouts (5 s parse, 5 s verify), any error 0.0. The
  alarms work only in a process's main thread, which is where the process pool runs it (verl
  uses a spawn pool for the same reason); inline in a thread, Math-Verify raises and the score is
  0.0, exactly verl's old silent-zero failure. verl gives ``timeout_score`` when its outer limit
  passes; the judger does the same at its deadline, and also kills the stuck worker.
- default: the same parse and verify with Math-Verify's timeouts switched off (the process pool's
  deadline kills a stuck worker instead, and reports a timeout rather than a wrong answer),
  without its tiny-number false positive (``1/2004!`` vs ``1/2006!``), of the committed text only
  (a box inside ``<think>`` reasoning is no answer), and with units of two dimensions refused
  (Math-Verify drops units, so ``7 km/h`` would equal ``7 m/s``).

Both return ``{"score", "acc", "pred"}``; ``pred`` is the extracted answer text, or None.
"""

from __future__ import annotations

from typing import Any, Literal

from judger.scorers.committed import committed_text
from judger.scorers.labels import missing_label
from judger.scorers.math.boxed import last_boxed
from judger.scorers.math.grade import parse_boxed, parse_response, verify_parsed
from judger.scorers.math.units import units_conflict

Compat = Literal["verl"] | None


def _pred_text(parsed: list[Any]) -> str | None:
    for item in reversed(parsed):
        if isinstance(item, str):
            return item
    return str(parsed[0]) if parsed else None


def compute_score_verl(solution_str: Any, ground_truth: Any) -> dict[str, Any]:
    """verl's scorer (see the module docstring); ``pred`` is added for majority voting.

    Math-Verify's default ``signal.alarm`` timeouts (5 s parse, 5 s verify) stay on, as in verl's
    worker processes; they need the main thread, where the process pool runs them.
    """
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    score = 0.0
    pred: str | None = None
    try:
        gold = parse("\\boxed{" + ground_truth + "}", (LatexExtractionConfig(),))
        parsed = parse(solution_str, (ExprExtractionConfig(), LatexExtractionConfig()))
        if gold and parsed:
            pred = _pred_text(parsed)
            score = max(1.0 if any(verify(g, p) for g in gold) else 0.0 for p in parsed)
    except Exception:
        score = 0.0
    return {"score": score, "acc": score == 1.0, "pred": pred}


def compute_score(
    solution_str: Any,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    *,
    compat: Compat = None,
    restates_question: bool = False,
) -> dict[str, Any]:
    """Score one response with Math-Verify (see the module docstring for the two modes).
    ``restates_question``: the boxed answer is an expression copied from the question (the judger
    reads it from the prompt: :mod:`~judger.scorers.math.restated`), wrong in the default mode."""
    if compat == "verl":
        return compute_score_verl(solution_str, ground_truth)
    if compat is not None:
        raise ValueError(f"compat must be 'verl' or None, got {compat!r}")

    if ground_truth is None:
        raise missing_label("math_verify scorer")
    gold = parse_boxed(str(ground_truth))
    if not gold:
        raise ValueError(f"math_verify scorer: Math-Verify cannot parse the label {ground_truth!r:.200}")
    committed = committed_text(solution_str) if isinstance(solution_str, str) else ""
    pred = parse_response(committed) if committed else []
    acc = not restates_question and verify_parsed(gold, pred)
    # Math-Verify drops units from both sides ("7 km/h" would equal "7 m/s"): the box as written
    boxed = last_boxed(committed) if acc else None
    if boxed is not None and units_conflict(boxed, str(ground_truth)):
        acc = False
    return {"score": 1.0 if acc else 0.0, "acc": acc, "pred": _pred_text(pred)}
