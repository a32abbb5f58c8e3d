"""Judged samples as the trainer adapters hand them back: a number for every sample, never a raise.

Every trainer here ends something on an exception from its reward (slime its rollout, NeMo-RL its
step, ROLL the job, rLLM re-runs the whole episode, AReaL retries then fails the workflow), and
each needs a number. :class:`Scorer` judges a batch with one judger and gives each sample an
:class:`Outcome`: the judger's score, or for a sample it could not score the failure reward (by
default the judger's lowest score for it, :mod:`judger.core.failure_reward`) and the reason, which
each adapter writes where its framework keeps per-sample information and which is logged.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from judger.compat.source import JudgerSource
from judger.compat.verl.batch import FailureLog
from judger.core import loops
from judger.core.deadlines import wait_for
from judger.core.failure_reward import LOWEST, FailureReward, FailureRewardSetting, check_failure_reward
from judger.core.judger import BaseJudger
from judger.core.outputs import finite_number
from judger.core.rollout import RolloutState, Status

logger = logging.getLogger(__name__)

FAILED_KEY = "judge_failed"
FAILURE_KEY = "judge_failure"


def row_value(row: Mapping[str, Any], key: str) -> tuple[bool, Any]:
    """``row[key]``, a dotted key reading nested mappings (``reward_model.ground_truth``)."""
    value: Any = row
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return False, None
        value = value[part]
    return True, value


@dataclass(frozen=True)
class Outcome:
    """One judged sample: ``score`` is always a finite number."""

    score: float
    reward: dict[str, Any] | None
    """The judger's reward dict; None when the sample failed."""
    failure: str | None
    """Why the judger could not score the sample; None when it did."""

    @property
    def failed(self) -> bool:
        return self.failure is not None

    def number(self, key: str) -> float:
        """The reward's ``key`` as a finite number (0.0 where missing or failed); ``score`` is
        :attr:`score`, ``judge_failed`` is 1.0 for a failed sample."""
        if key == "score":
            return self.score
        if key == FAILED_KEY:
            return 1.0 if self.failed else 0.0
        value = finite_number(self.reward.get(key)) if self.reward else None
        return 0.0 if value is None else value

    def reward_dict(self) -> dict[str, Any]:
        """The reward dict a framework stores per sample: the judger's, plus ``judge_failed``;
        for a failed sample ``score`` (the failure reward), ``judge_failed`` 1.0 and the reason."""
        if self.reward is None:
            return {"score": self.score, FAILED_KEY: 1.0, FAILURE_KEY: self.failure}
        return {**self.reward, "score": self.score, FAILED_KEY: 0.0}


class Scorer:
    """Judges states with the judger of ``source`` (built on first use, once per process) and turns
    each into an :class:`Outcome`. Pickles as its settings."""

    def __init__(
        self,
        source: Any = None,
        *,
        failure_reward: FailureRewardSetting = LOWEST,
        name: str = "judger",
        deadline: float | None = None,
    ) -> None:
        self.source = source if isinstance(source, JudgerSource) else JudgerSource(source)
        self.failure_reward_setting = check_failure_reward(failure_reward, "failure_reward")
        self.name = name
        if deadline is not None and not deadline > 0:
            raise ValueError(f"deadline must be a positive number of seconds or None, got {deadline!r}")
        self.deadline = deadline
        """Seconds a batch may take in all; a sample still unjudged then fails as a timeout."""
        self._failure: tuple[BaseJudger, FailureReward, FailureLog] | None = None

    @property
    def judger(self) -> BaseJudger:
        return self.source.get()

    def _failures(self) -> tuple[FailureReward, FailureLog]:
        judger = self.judger
        if self._failure is None or self._failure[0] is not judger:
            failure = FailureReward(self.failure_reward_setting, judger, "failure_reward", logger)
            self._failure = (judger, failure, FailureLog(self.name, logger))
        return self._failure[1], self._failure[2]

    async def score(self, states: Sequence[RolloutState]) -> list[Outcome]:
        """Judge ``states`` (those already FAILED are not judged) and give each its outcome."""
        states = list(states)
        todo = [s for s in states if s.status is not Status.FAILED]
        if todo:
            judger = self.judger  # a config error raises here, before any sample: it is no sample's
            try:
                await wait_for(judger.batch_judge(todo), self.deadline)
            except TimeoutError:
                _fail_unjudged(
                    todo, f"TimeoutError: not judged within the adapter's deadline of {self.deadline} s"
                )
            except Exception as exc:  # a judger built to raise: its samples fail, the caller goes on
                _fail_unjudged(todo, f"judging raised {type(exc).__name__}: {exc}")
        return [self.outcome(state) for state in states]

    def score_sync(self, states: Sequence[RolloutState]) -> list[Outcome]:
        """:meth:`score` from sync code (a worker thread, a process, a Ray actor's method)."""
        return loops.run_sync(lambda: self.score(states))

    def outcome(self, state: RolloutState) -> Outcome:
        failure_reward, log = self._failures()
        reward = state.reward
        score = finite_number(reward.get("score")) if isinstance(reward, dict) else None
        if state.status is Status.FAILED or reward is None or score is None:
            number = failure_reward.of(state)
            message = state.error_msg or (
                "the judger gave no numeric score" if reward is not None else "the judger gave no reward"
            )
            state.error_msg = message
            log.record(state, number)
            return Outcome(number, None, message)
        failure_reward.watch(state, score)
        return Outcome(score, reward, None)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_failure": None}

    def __repr__(self) -> str:
        setting = self.failure_reward_setting
        return f"{type(self).__name__}({self.source.describe()!r}, failure_reward={setting!r})"


def _fail_unjudged(states: Sequence[RolloutState], message: str) -> None:
    for state in states:
        if state.reward is None and state.status is not Status.FAILED:
            state.status = Status.FAILED
            state.error_msg = message
