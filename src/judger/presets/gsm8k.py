"""GSM8KJudgerConfig: ``#### <number>`` answers, scored inline (a regex over 300 characters)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from judger.presets.base import Execution, ScorerFn, ScorerJudger, ScorerJudgerConfig
from judger.presets.inline import InlineScorerJudger
from judger.scorers.math.gsm8k import CLIP_CHARS, compute_score, make_batch_scorer


class GSM8KJudgerConfig(ScorerJudgerConfig):
    """GSM8K's final-answer check (see :mod:`judger.scorers.math.gsm8k`).

    ``method="strict"`` needs ``#### <number>``; ``"flexible"`` takes the last number. By default
    answers are compared as numbers (``#### 1234.``, ``1234.00`` and ``$1,234`` equal ``1234``);
    ``compat="verl"`` reproduces verl's string comparison exactly. The output is
    ``{"score", "acc", "pred"}``: ``score`` if correct, ``format_score`` if a wrong answer was found,
    0 if none was.
    """

    xtuner_extra_info: ClassVar[tuple[str, ...]] = ("score", "format_score")

    # the scorer reads no extra_info: verl rows differing only there are scored once
    extra_info_fields: ClassVar[tuple[str, ...] | None] = ()
    judger_name: str = Field("openai/gsm8k", description="the judger's name; verl's data_source for GSM8K")
    method: Literal["strict", "flexible"] = Field(
        "strict", description="'strict': the number after '####'; 'flexible': the last number of the response"
    )
    format_score: float = Field(0.0, description="score of a well-formed but wrong answer")
    score: float = Field(1.0, description="score of a correct answer")
    execution: Execution = Field(
        "inline", description="'inline' (default: a regex check, cheaper than a process hop) or 'process'"
    )

    def preset_floor(self) -> float:
        # no answer found scores 0
        return min(0.0, self.format_score, self.score)

    def scorer(self) -> ScorerFn:
        return compute_score

    def scorer_options(self) -> dict[str, Any]:
        return {
            "compat": self.compat,
            "method": self.method,
            "format_score": self.format_score,
            "score": self.score,
        }

    def judger_class(self) -> type[ScorerJudger]:
        return InlineScorerJudger if self.execution == "inline" else ScorerJudger

    def judger_options(self) -> dict[str, Any]:
        # both extraction methods read only the last CLIP_CHARS characters
        options: dict[str, Any] = {"response_window": CLIP_CHARS}
        if self.execution == "inline":
            bound = (self.compat, self.method, self.format_score, self.score)
            options["batch_scorer"] = make_batch_scorer(*bound)
        return options
