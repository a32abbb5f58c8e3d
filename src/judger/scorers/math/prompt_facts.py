"""What the MATH grading reads from the prompt: an order, a rounding, the question's expressions.

The prompt is the dataset's text, never the policy's: reading it can only make a verdict stricter
(an order) or name the evidence a lenient rule needs (a rounding). These are the keyword options of
:func:`~judger.scorers.math.reward.compute_score`; a caller without the prompt passes none and gets
the strict verdicts.
"""

from __future__ import annotations

from typing import Any

from judger.scorers.math.order import asks_for_order, prompt_text
from judger.scorers.math.restated import copies_question, restates_question
from judger.scorers.math.reward import ground_truth_text
from judger.scorers.math.rounding import requested_rounding


def prompt_facts(message: Any, answer: str | None, label: Any, unboxed: str | None = None) -> dict[str, Any]:
    """``ordered``, ``rounding`` and ``restates_question`` for :func:`compute_score`, where they
    hold (a chat prompt's last user turn, or a plain string, as ``message``). ``unboxed``: the
    committed text the answer was read from without a box, which must not be the question's own
    last line (:func:`~judger.scorers.math.restated.copies_question`)."""
    facts: dict[str, Any] = {}
    if asks_for_order(message):
        facts["ordered"] = True
    rounding = requested_rounding(message)
    if rounding is not None:
        facts["rounding"] = rounding
    if not answer:
        return facts
    question = prompt_text(message)
    restated = isinstance(label, str) and restates_question(answer, question, ground_truth_text(label))
    if restated or (unboxed is not None and copies_question(unboxed, question)):
        facts["restates_question"] = True
    return facts
