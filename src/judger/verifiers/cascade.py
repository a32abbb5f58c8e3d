"""CascadeJudger: a cheap rule judger first, an LLM verifier only where the rule says no."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from judger.core.failure import JudgeFailure
from judger.core.judger import (
    DEFAULT_MAX_CONCURRENCY,
    BatchJudger,
    Judger,
    JudgerOutput,
    JudgerPayload,
    OnError,
    PayloadResult,
)
from judger.core.rollout import RolloutState
from judger.judgers.config import ComposedJudgerConfig, JudgerConfig, build_judger

RuleFailurePolicy = Literal["verifier", "fail"]


def rule_says_correct(output: JudgerOutput, correct_score: float = 1.0) -> bool:
    """``acc`` when the rule reports it; otherwise ``score >= correct_score``. A missing ``pred``
    (the rule could not extract an answer) is never correct."""
    if "pred" in output and output["pred"] is None:
        return False
    if "acc" in output:
        return bool(output["acc"])
    return float(output.get("score", 0.0)) >= correct_score


class CascadeJudger(BatchJudger):
    """Run ``rule`` on every sample, then ``verifier`` only on those the rule did not accept.

    A sample the rule marks correct keeps the rule's reward (``decided_by="rule"``, ``acc=True``,
    ``verdict="correct"`` unless the rule set one); any other sample (incorrect, nothing extracted,
    or, with ``on_rule_failure="verifier"``, a rule failure) takes the verifier's reward
    (``decided_by="verifier"``) with the rule's view kept under ``rule``. A verifier failure fails
    the sample: a wrong answer is never made up for a judge that could not answer.
    """

    def __init__(
        self,
        rule: Judger,
        verifier: Judger,
        judger_name: str = "cascade_judger",
        *,
        rule_correct_score: float = 1.0,
        on_rule_failure: RuleFailurePolicy = "verifier",
        on_error: OnError = "fail",
        timeout: float | None = None,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    ) -> None:
        for role, judger in (("rule", rule), ("verifier", verifier)):
            if not isinstance(judger, Judger):
                raise TypeError(f"CascadeJudger {role} must be a Judger, got {type(judger).__name__}")
        if on_rule_failure not in ("verifier", "fail"):
            raise ValueError(f"on_rule_failure must be 'verifier' or 'fail', got {on_rule_failure!r}")
        # the cascade's own deadline covers both stages, each of which has its own
        total = timeout if timeout is not None else rule.timeout + verifier.timeout
        super().__init__(judger_name, on_error=on_error, timeout=total, max_concurrency=max_concurrency)
        self.rule = rule
        self.verifier = verifier
        self.rule_correct_score = rule_correct_score
        self.on_rule_failure: RuleFailurePolicy = on_rule_failure

    def lowest_score_for(self, rollout_state: RolloutState) -> float | None:
        if self.lowest_score is not None:
            return self.lowest_score
        # the reward is one stage's: the lower of their floors, when both are known
        floors = [self.rule.lowest_score_for(rollout_state), self.verifier.lowest_score_for(rollout_state)]
        return None if None in floors else min(f for f in floors if f is not None)

    def preprocess(self, rollout_state: RolloutState) -> JudgerPayload:
        return {
            "rule": self.rule.preprocess(rollout_state),
            "verifier": self.verifier.preprocess(rollout_state),
        }

    async def judge(self, rollout_state: RolloutState) -> RolloutState:
        # the batch path keeps a stage's failure as it is, naming the stage that failed
        return (await self.batch_judge([rollout_state]))[0]

    async def _judge_batch(self, payloads: list[JudgerPayload]) -> list[Any]:
        rule_results = await self.rule.run_payloads([p["rule"] for p in payloads])
        results: list[PayloadResult | None] = [None] * len(payloads)
        escalate: list[int] = []
        for i, result in enumerate(rule_results):
            if isinstance(result, JudgeFailure):
                if self.on_rule_failure == "fail":
                    results[i] = result
                else:
                    escalate.append(i)
            elif rule_says_correct(result, self.rule_correct_score):
                output = dict(result)
                output["acc"] = True
                output.setdefault("verdict", "correct")
                output["decided_by"] = "rule"
                results[i] = output
            else:
                escalate.append(i)
        if escalate:
            verdicts = await self.verifier.run_payloads([payloads[i]["verifier"] for i in escalate])
            for i, verdict in zip(escalate, verdicts):
                results[i] = (
                    verdict
                    if isinstance(verdict, JudgeFailure)
                    else self._escalated(verdict, rule_results[i])
                )
        return results

    @staticmethod
    def _escalated(verdict: JudgerOutput, rule_result: PayloadResult) -> JudgerOutput:
        output = dict(verdict)
        output["decided_by"] = "verifier"
        if isinstance(rule_result, JudgeFailure):
            output["rule"] = {"failure": rule_result.message}
        else:
            output["rule"] = {k: rule_result[k] for k in ("score", "acc", "pred") if k in rule_result}
        return output

    async def aclose(self) -> None:
        await self.rule.aclose()
        await self.verifier.aclose()


class CascadeJudgerConfig(JudgerConfig):
    """``CascadeJudgerConfig(rule=GSM8KJudgerConfig(), verifier=CompassVerifierV2Config(hosts=[...]))``.

    ``rule`` and ``verifier`` are judger configs (built with :func:`judger.build_judger`, so either
    may run on Ray actors) or built Judgers. See :class:`CascadeJudger` for what decides.
    """

    judger_name: str = Field(
        "cascade_judger", description="the judger's name (in failures, logs and reports)"
    )
    rule: Any = Field(
        description="the rule judger asked first (a config or a built Judger); its correct answers are final"
    )
    verifier: Any = Field(description="the LLM verifier asked where the rule judger says no")
    rule_correct_score: float = Field(
        1.0, description="rule score counted as correct when it reports no 'acc'"
    )
    on_rule_failure: RuleFailurePolicy = Field(
        "verifier",
        description=(
            "a sample the rule judger fails on: 'verifier' asks the verifier; 'fail' fails the sample"
        ),
    )
    cascade_timeout: float | None = Field(None, gt=0, description="deadline of both stages; None: their sum")

    @field_validator("rule", "verifier")
    @classmethod
    def _check_stage(cls, value: Any) -> Any:
        if not isinstance(value, (JudgerConfig, ComposedJudgerConfig, Judger)):
            raise ValueError(
                f"must be a JudgerConfig, a ComposedJudgerConfig or a Judger, got {type(value).__name__}"
            )
        return value

    def build_local(self) -> CascadeJudger:
        def build(stage: Any) -> Judger:
            return stage if isinstance(stage, Judger) else build_judger(stage)

        return CascadeJudger(
            build(self.rule),
            build(self.verifier),
            self.judger_name,
            rule_correct_score=self.rule_correct_score,
            on_rule_failure=self.on_rule_failure,
            on_error=self.on_error,
            timeout=self.cascade_timeout,
            max_concurrency=self.max_concurrency,
        )
