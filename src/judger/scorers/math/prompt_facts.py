"""What the MATH grading reads from the prompt: an order, a rounding, the question's expressions.

The prompt is the dataset's text, never the policy's: reading it can only make a verdict stricter
(an order) or name the evidence a lenient rule needs (a rounding). These are the keyword options of
:func:`~judger.scorers.math.reward.compute_score`; a caller without the prompt passes none and gets
the strict verdicts.
"""

from __future__ import annotations

from typing import Any

from judger.scorers.math.order import asks_for_order, prompt_text
from judger.scorers.math.restated import restates_question
from judger.scorers.math.reward import ground_truth_text
from judger.scorers.math.rounding import requested_rounding


def prompt_facts(message: Any, answer: str | None, label: Any) -> dict[str, Any]:
    """``ordered``, ``rounding`` and ``restates_question`` for :func:`compute_score`, where they
    hold (a chat prompt's last user turn, or a plain string, as ``message``)."""
    facts: dict[str, Any] = {}
    if asks_for_order(message):
        facts["ordered"] = True
    rounding = requested_rounding(message)
    if rounding is not None:
        facts["rounding"] = rounding
    if (
        answer
        and isinstance(label, str)
        and restates_question(answer, prompt_text(message), ground_truth_text(label))
    ):
        facts["restates_question"] = True
    return facts
