"""An rLLM evaluator backed by a judger: ``judger.compat.rllm:JudgerEvaluator``.

    # rLLM: load_evaluator("judger.compat.rllm:JudgerEvaluator"), with JUDGER_CONFIG=math
    from judger.compat.rllm import make_evaluator
    evaluator = make_evaluator("math", label_key="ground_truth")    # or in a module of yours

rLLM (9beb6e0) loads an evaluator by ``module:attr`` (``rllm/eval/evaluator_loader.py``: a class is
instantiated with no arguments, an instance used as it is) and calls ``evaluate(task, episode)`` on
a thread pool (``rllm/engine/agentflow_engine.py``); an exception re-runs the whole episode,
generation included, up to 3 times. The evaluator here:

- reads the answer as rLLM's own evaluators do: ``episode.artifacts["answer"]``, else the last
  trajectory's ``output``, else its last step's ``output``, else the last step with a
  ``model_response``;
- reads the label from ``task.metadata[label_key]`` (default ``ground_truth``, rLLM's column;
  ``$JUDGER_LABEL_KEY`` for the class made without arguments; a dotted key reads a nested one)
  and ``data_source`` / ``extra_info`` from the metadata when there;
- returns an ``EvalOutput`` (rLLM's own when rLLM is installed): ``reward`` the judger's score,
  ``is_correct`` its ``acc`` (else score >= 1), signals ``accuracy`` and ``judge_failed``; for a
  sample the judger fails on, the failure reward (default the judger's lowest score),
  ``is_correct`` False and ``metadata["judge_failure"]`` the reason, also logged. Never an
  exception, so a judge failure never re-runs an episode.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from judger.compat.scoring import FAILED_KEY, FAILURE_KEY, Outcome, Scorer, row_value
from judger.core.failure_reward import LOWEST, FailureRewardSetting
from judger.core.rollout import RolloutState, Status

LABEL_ENV = "JUDGER_LABEL_KEY"
DEFAULT_LABEL_KEY = "ground_truth"


@dataclass
class Signal:
    """rLLM's ``Signal`` (``rllm/eval/types.py``), used where rLLM is not installed."""

    name: str
    value: float
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class EvalOutput:
    """rLLM's ``EvalOutput`` (``rllm/eval/types.py``), used where rLLM is not installed."""

    reward: float
    is_correct: bool
    signals: list[Any] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)


def _output_types() -> tuple[Any, Any]:
    try:
        from rllm.eval.types import EvalOutput as RllmEvalOutput
        from rllm.eval.types import Signal as RllmSignal
    except ImportError:
        return EvalOutput, Signal
    return RllmEvalOutput, RllmSignal


def answer_text(episode: Any) -> str:
    """The episode's final answer, found where rLLM's evaluators look for it."""
    artifacts = getattr(episode, "artifacts", None) or {}
    if "answer" in artifacts:
        return str(artifacts["answer"])
    trajectories = getattr(episode, "trajectories", None) or []
    if not trajectories:
        return ""
    last = trajectories[-1]
    if getattr(last, "output", None):
        return str(last.output)
    steps = getattr(last, "steps", None) or []
    if steps and getattr(steps[-1], "output", None):
        return str(steps[-1].output)
    for step in reversed(steps):
        if getattr(step, "model_response", None):
            return str(step.model_response)
    return ""


class JudgerEvaluator:
    """rLLM's evaluator over a judger (see the module docstring). Made with no arguments (as rLLM's
    loader makes a class), it judges with ``$JUDGER_CONFIG``."""

    def __init__(
        self,
        source: Any = None,
        *,
        label_key: str | None = None,
        failure_reward: FailureRewardSetting = LOWEST,
    ) -> None:
        self.scorer = Scorer(source, failure_reward=failure_reward, name="rLLM evaluator")
        self.label_key = label_key or os.environ.get(LABEL_ENV) or DEFAULT_LABEL_KEY

    def state(self, task: Any, episode: Any) -> RolloutState:
        metadata = getattr(task, "metadata", task)
        metadata = metadata if isinstance(metadata, Mapping) else {}
        found, label = row_value(metadata, self.label_key)
        instruction = getattr(task, "instruction", None)
        extra = metadata.get("extra_info")
        source = metadata.get("data_source")
        state = RolloutState(
            message=[{"role": "user", "content": instruction}] if isinstance(instruction, str) else [],
            response=answer_text(episode),
            reward_model={"ground_truth": label},
            data_source=source if isinstance(source, (str, dict)) else None,
            status=Status.COMPLETED,
            extra_fields={"extra_info": dict(extra)} if isinstance(extra, Mapping) else {},
        )
        if not found:
            state.status = Status.FAILED
            state.error_msg = (
                f"rLLM evaluator: the task's metadata has no {self.label_key!r} (keys: {sorted(metadata)}); "
                f"name the label with label_key= or ${LABEL_ENV}"
            )
        return state

    def evaluate(self, task: Any, episode: Any) -> Any:
        outcome = self.scorer.score_sync([self.state(task, episode)])[0]
        return self.output(outcome)

    def output(self, outcome: Outcome) -> Any:
        output_type, signal_type = _output_types()
        if outcome.failed:
            correct = False
            metadata: dict[str, Any] = {FAILURE_KEY: outcome.failure}
        else:
            acc = outcome.reward.get("acc") if outcome.reward else None
            correct = bool(acc) if acc is not None else outcome.score >= 1.0
            metadata = {}
        signals = [
            signal_type(name="accuracy", value=1.0 if correct else 0.0),
            signal_type(name=FAILED_KEY, value=outcome.number(FAILED_KEY)),
        ]
        return output_type(reward=outcome.score, is_correct=correct, signals=signals, metadata=metadata)

    def __repr__(self) -> str:
        return f"JudgerEvaluator({self.scorer.source.describe()!r}, label_key={self.label_key!r})"


def make_evaluator(
    source: Any = None, *, label_key: str | None = None, failure_reward: FailureRewardSetting = LOWEST
) -> JudgerEvaluator:
    """An rLLM evaluator judging with ``source`` (a preset name, a config, a file or module spec;
    None: ``$JUDGER_CONFIG``); ``label_key``: the task metadata's label (default ``ground_truth``)."""
    return JudgerEvaluator(source, label_key=label_key, failure_reward=failure_reward)
