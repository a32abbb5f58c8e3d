"""MathVerifyJudgerConfig: Math-Verify's parse + verify over the whole response, on the process pool."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import Field, model_validator

from judger.core.judger import JudgerPayload
from judger.core.rollout import RolloutState
from judger.presets.base import ScorerFn, ScorerJudger, ScorerJudgerConfig
from judger.presets.math import DEFAULT_MATH_TIMEOUT
from judger.scorers.committed import committed_text
from judger.scorers.math.boxed import last_boxed
from judger.scorers.math.order import prompt_text
from judger.scorers.math.restated import restates_question
from judger.scorers.math.verify import compute_score


def _process_by_default(data: Any) -> Any:
    # both modes run Math-Verify, which can hang: always killable workers unless asked otherwise
    if isinstance(data, dict) and "execution" not in data:
        data = {**data, "execution": "process"}
    return data


class MathVerifyJudger(ScorerJudger):
    """With ``timeout_score`` set (compat="verl"), a sample past its deadline scores that, as in verl."""

    def __init__(self, *args: Any, timeout_score: float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.timeout_score = timeout_score

    def preprocess(self, rollout_state: RolloutState) -> JudgerPayload:
        payload = super().preprocess(rollout_state)
        response = payload.get("response")
        if self.options.get("compat") is None and self.scorer is compute_score and isinstance(response, str):
            # Math-Verify evaluates what it extracts: the question's own expression equals the label
            boxed = last_boxed(committed_text(response))
            if boxed is not None and restates_question(
                boxed, prompt_text(rollout_state.message), str(payload.get("label"))
            ):
                payload["scorer_kwargs"] = {"restates_question": True}
        return payload

    async def _score(self, payloads: Sequence[JudgerPayload]) -> list[Any]:
        results = await super()._score(payloads)
        if self.timeout_score is None:
            return results
        return [
            {"score": self.timeout_score, "acc": False, "pred": None, "timeout": True}
            if isinstance(r, TimeoutError)
            else r
            for r in results
        ]


class MathVerifyJudgerConfig(ScorerJudgerConfig):
    """Math-Verify with its recommended reward settings (see :mod:`judger.scorers.math.verify`).

    The label is parsed as ``\\boxed{label}`` (LaTeX extraction), the response with LaTeX and
    expression extraction, and ``verify(gold, pred)`` decides. Output
    ``{"score": 1.0 | 0.0, "acc": bool, "pred": str | None}``.

    ``compat="verl"`` reproduces verl's ``math_verify`` scorer exactly, including its
    ``signal.alarm`` timeouts (which work here because the pool runs it in a worker's main thread)
    and ``timeout_score`` for a sample that overruns the deadline (the stuck worker is killed,
    which verl does not do). The default mode differs in that Math-Verify's
    alarms are off and the pool's deadline kills a stuck worker instead (a *timeout failure*, not a
    0 score), a label Math-Verify cannot parse fails the sample instead of scoring 0, and
    Math-Verify's tiny-number false positives (``1/2004!`` vs ``1/2006!``) are rejected.
    """

    # the scorer reads no extra_info: verl rows differing only there are scored once
    extra_info_fields: ClassVar[tuple[str, ...] | None] = ()
    judger_name: str = Field("math_verify", description="the judger's name (in failures, logs and reports)")
    timeout: float = Field(DEFAULT_MATH_TIMEOUT, gt=0, description="deadline of one sample, in seconds")
    timeout_score: float = Field(0.0, description="compat='verl': score of a Math-Verify timeout")

    @model_validator(mode="before")
    @classmethod
    def _pick_execution(cls, data: Any) -> Any:
        return _process_by_default(data)

    def preset_floor(self) -> float:
        return min(0.0, self.timeout_score)

    def scorer(self) -> ScorerFn:
        return compute_score

    def judger_class(self) -> type[ScorerJudger]:
        return MathVerifyJudger

    def judger_options(self) -> dict[str, Any]:
        return {"timeout_score": self.timeout_score if self.compat == "verl" else None}
