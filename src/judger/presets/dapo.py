"""DapoMathJudgerConfig: DAPO's Minerva ``Answer:`` scorer with eos stripping and the overlong penalty."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, model_validator

from judger.core.judger import JudgerPayload
from judger.core.rollout import RolloutState
from judger.presets.base import ScorerFn, ScorerJudger, ScorerJudgerConfig
from judger.presets.math import DEFAULT_MATH_TIMEOUT, default_execution


class DapoMathJudger(ScorerJudger):
    """Passes the response's token count (``len(response_ids)``) to the scorer for the overlong penalty."""

    def preprocess(self, rollout_state: RolloutState) -> JudgerPayload:
        payload = super().preprocess(rollout_state)
        if self.options.get("max_response_len") is not None:
            if rollout_state.response_ids is None:
                raise ValueError(
                    f"judger {self.judger_name!r}: enable_overlong_buffer needs response_ids on the "
                    "rollout state (the penalty counts response tokens)"
                )
            payload["scorer_kwargs"] = {"response_length": len(rollout_state.response_ids)}
        return payload


class DapoMathJudgerConfig(ScorerJudgerConfig):
    """DAPO math (see :mod:`judger.scorers.math.dapo`): +1 / -1 on the last ``Answer: ...`` line.

    Output ``{"score", "acc", "pred"}``, plus ``overlong_reward`` and ``overlong`` when the
    overlong buffer is on, in which case ``score`` includes the penalty
    ``min(-(L - (max_response_len - overlong_buffer_len)) / overlong_buffer_len * factor, 0)``
    (``factor`` = ``overlong_penalty_factor``) with ``L = len(response_ids)``, as verl's DAPO reward
    manager computes it (XTuner re-tokenises the text instead).
    One trailing ``eos_token`` is stripped from the response first.

    ``compat="verl"`` reproduces verl's ``math_dapo`` exactly (string equality after Minerva
    normalisation; runs inline). The default mode keeps the same extraction and format requirement
    but, when the normalised strings differ, compares them with Math-Verify's equivalence, fixing
    false negatives such as ``Answer: 5.0`` vs ``5`` or ``Answer: 1/2`` vs ``\\frac{1}{2}``; it runs
    on the process pool with a deadline per sample.
    """

    # the scorer reads no extra_info: verl rows differing only there are scored once
    extra_info_fields: ClassVar[tuple[str, ...] | None] = ()
    judger_name: str = "math_dapo"
    timeout: float = Field(DEFAULT_MATH_TIMEOUT, gt=0, description="deadline of one sample, in seconds")
    eos_token: str | None = Field(None, description="stripped once from the end of the response")
    strict_box_verify: bool = Field(
        False, description="verl's strict mode: last \\boxed{} of the last 100 chars"
    )
    boxed_fallback: bool = Field(
        True, description="no 'Answer:' line: grade the last \\boxed{} (verl 0.9); False: older verl / XTuner"
    )
    enable_overlong_buffer: bool = False
    max_response_len: int | None = Field(None, gt=0, description="required with enable_overlong_buffer")
    overlong_buffer_len: int | None = Field(None, gt=0, description="required with enable_overlong_buffer")
    overlong_penalty_factor: float | None = Field(
        None, ge=0, description="required with enable_overlong_buffer"
    )

    @model_validator(mode="before")
    @classmethod
    def _pick_execution(cls, data: Any) -> Any:
        return default_execution(data)

    @model_validator(mode="after")
    def _check_overlong(self) -> DapoMathJudgerConfig:
        if self.enable_overlong_buffer:
            missing = [
                name
                for name in ("max_response_len", "overlong_buffer_len", "overlong_penalty_factor")
                if getattr(self, name) is None
            ]
            if missing:
                raise ValueError(f"enable_overlong_buffer=True requires {', '.join(missing)}")
            assert self.max_response_len is not None and self.overlong_buffer_len is not None
            if self.overlong_buffer_len > self.max_response_len:
                raise ValueError(
                    f"overlong_buffer_len ({self.overlong_buffer_len}) must not exceed "
                    f"max_response_len ({self.max_response_len})"
                )
        return self

    def scorer(self) -> ScorerFn:
        from judger.scorers.math.dapo import compute_score

        return compute_score

    def scorer_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"compat": self.compat}
        if self.eos_token:
            options["eos_token"] = self.eos_token
        if self.strict_box_verify:
            options["strict_box_verify"] = True
        if not self.boxed_fallback:
            options["boxed_fallback"] = False
        if self.enable_overlong_buffer:
            options["max_response_len"] = self.max_response_len
            options["overlong_buffer_len"] = self.overlong_buffer_len
            options["overlong_penalty_factor"] = self.overlong_penalty_factor
        return options

    def judger_class(self) -> type[ScorerJudger]:
        return DapoMathJudger
