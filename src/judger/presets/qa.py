"""QAExactMatchJudgerConfig: search-R1 ``<answer>`` exact match, scored inline."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from judger.presets.base import Execution, ScorerFn, ScorerJudger, ScorerJudgerConfig
from judger.presets.inline import InlineScorerJudger
from judger.scorers.qa import compute_score


class QAExactMatchJudgerConfig(ScorerJudgerConfig):
    """Exact match of the last ``<answer>...</answer>`` against any target (see :mod:`judger.scorers.qa`).

    The label is search-R1's ``{"target": [...]}``, a list of answers, or one string. The output is
    ``{"score", "acc", "pred"}``; ``compat="verl"`` reproduces verl's ``search_r1_like_qa_em``.
    """

    # the scorer reads no extra_info: verl rows differing only there are scored once
    extra_info_fields: ClassVar[tuple[str, ...] | None] = ()
    judger_name: str = Field(
        "qa_exact_match", description="the judger's name (in failures, logs and reports)"
    )
    format_score: float = Field(0.0, description="score of a wrong answer inside <answer> tags")
    score: float = Field(1.0, description="score of a correct answer (divided by 4 past 10 answer tags)")
    execution: Execution = Field(
        "inline",
        description="'inline' (default: an exact-match check, cheaper than a process hop) or 'process'",
    )

    def preset_floor(self) -> float:
        # no <answer> tag scores 0
        return min(0.0, self.format_score, self.score)

    def scorer(self) -> ScorerFn:
        return compute_score

    def scorer_options(self) -> dict[str, Any]:
        return {"compat": self.compat, "format_score": self.format_score, "score": self.score}

    def judger_class(self) -> type[ScorerJudger]:
        return InlineScorerJudger
