"""GEO3KJudgerConfig: Geometry3K, 0.9 accuracy + 0.1 format, on the process pool."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, model_validator

from judger.core.judger import JudgerPayload
from judger.core.rollout import RolloutState
from judger.presets.base import ScorerFn, ScorerJudger, ScorerJudgerConfig
from judger.presets.math import DEFAULT_MATH_TIMEOUT, add_prompt_facts
from judger.scorers.committed import committed_text
from judger.scorers.labels import missing_label
from judger.scorers.math.boxed import run_answer
from judger.scorers.math.geo3k import compute_score


class GEO3KJudger(ScorerJudger):
    """Fails a sample without a label, as the other math presets do, instead of grading it 0."""

    def preprocess(self, rollout_state: RolloutState) -> JudgerPayload:
        payload = super().preprocess(rollout_state)
        # compat="verl" keeps verl's behaviour (mathruler grades a None label as wrong)
        if payload.get("label") is None and self.options.get("compat") is None:
            raise missing_label(f"judger {self.judger_name!r}")
        response = payload.get("response")
        if self.options.get("compat") is None and self.scorer is compute_score and isinstance(response, str):
            add_prompt_facts(payload, rollout_state.message, run_answer(committed_text(response)))
        return payload


class GEO3KJudgerConfig(ScorerJudgerConfig):
    """Geometry3K (:mod:`judger.scorers.math.geo3k`): ``(1 - format_score) * acc + format_score * format``.

    ``format`` is 1 for ``<think>...</think> ... \\boxed{...}``; ``acc`` grades the last boxed
    answer. Output ``{"score", "acc", "pred", "format"}``.

    ``compat="verl"`` reproduces verl's ``geo3k`` exactly by grading with ``mathruler`` as verl
    does (an extra dependency: ``pip install mathruler``). The default mode grades with Math-Verify's
    equivalence instead and needs nothing more. Both modes run on the process pool (sympy can hang)
    and check the format in linear time (verl's regex backtracks on long responses).
    """

    xtuner_extra_info: ClassVar[tuple[str, ...]] = ("format_score", "use_boxed")

    # the scorer reads no extra_info: verl rows differing only there are scored once
    extra_info_fields: ClassVar[tuple[str, ...] | None] = ()
    judger_name: str = Field(
        "hiyouga/geometry3k", description="the judger's name; verl's data_source for Geometry3K"
    )
    timeout: float = Field(DEFAULT_MATH_TIMEOUT, gt=0, description="deadline of one sample, in seconds")
    format_score: float = Field(0.1, ge=0, le=1, description="weight of the format reward")
    use_boxed: bool = Field(True, description="grade the last \\boxed{} content (False: the whole response)")

    @model_validator(mode="before")
    @classmethod
    def _pick_execution(cls, data: Any) -> Any:
        if isinstance(data, dict) and "execution" not in data and data.get("reward_handler") is None:
            data = {**data, "execution": "process"}
        return data

    @model_validator(mode="after")
    def _check_mathruler(self) -> GEO3KJudgerConfig:
        if self.compat == "verl":
            import importlib.util

            if importlib.util.find_spec("mathruler") is None:
                raise ValueError(
                    "GEO3K compat='verl' grades with mathruler as verl does: pip install mathruler"
                )
        return self

    def preset_floor(self) -> float:
        return 0.0

    def scorer(self) -> ScorerFn:
        return compute_score

    def scorer_options(self) -> dict[str, Any]:
        return {"compat": self.compat, "format_score": self.format_score, "use_boxed": self.use_boxed}

    def judger_class(self) -> type[ScorerJudger]:
        return GEO3KJudger
