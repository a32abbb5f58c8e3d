"""Judge a batch of verl samples with a judger and hand back what verl needs: a number per sample.

:func:`score_rows` is the one judging of verl's rows, shared by every calling convention (the reward
managers, :func:`~judger.compat.verl.compute_score.default_compute_score_batch`). A sample the
judger cannot score (FAILED) gets ``failure_score`` (by default the lowest score its route gives,
:mod:`judger.core.failure_reward`) and a ``judge_failure`` entry naming the failure kind
(:class:`Failures`), and the failure is logged with its message: verl needs a number in the reward
tensor, and the user needs to hear about it.
"""

from __future__ import annotations

import logging
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from judger.core import loops
from judger.core.failure_reward import FailureReward
from judger.core.judger import BaseJudger
from judger.core.rollout import RolloutState, Status
from judger.core.sparse_log import SparseLog

logger = logging.getLogger(__name__)

T = TypeVar("T")
FAILURE_KEY = "judge_failure"
DEFAULT_EXTRA_KEYS = ("score", "acc", "pred", FAILURE_KEY)
"""The ``reward_extra_info`` keys by default. ``acc`` makes verl's headline validation metric
``val-core/<ds>/acc/...`` instead of ``.../reward/...``; choose the keys with ``reward_extra_keys``."""


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from sync code, also when the caller already runs an event loop."""
    return loops.run_sync(lambda: coro)


def to_state(data_source: Any, response: Any, ground_truth: Any, extra_info: Any) -> RolloutState:
    extra = {"extra_info": dict(extra_info)} if isinstance(extra_info, Mapping) and extra_info else {}
    question = extra_info.get("question") if isinstance(extra_info, Mapping) else None
    # verl hands the reward function no prompt; its preprocessing keeps the question in extra_info
    # for some datasets, and the MATH grading reads what it asks for (an order, a rounding)
    message = [{"role": "user", "content": question}] if isinstance(question, str) else []
    return RolloutState(
        data_source=data_source,
        message=message,
        response=response,
        reward_model={"ground_truth": ground_truth},
        status=Status.COMPLETED,
        extra_fields=extra,
    )


class FailureLog:
    """Logs judge failures: the first few with their message, then a count at powers of two."""

    def __init__(self, name: str, log: logging.Logger = logger) -> None:
        self.name = name
        self.log = log
        self._sparse = SparseLog(first=3)

    @property
    def count(self) -> int:
        return self._sparse.count

    def record(self, state: RolloutState, reward: float) -> None:
        n = self._sparse.tick()
        if n is not None:
            self.log.warning(
                "judger (%s): a sample of data_source=%r could not be scored, reward %s: %s "
                "(%d failed samples so far)",
                self.name,
                state.data_source,
                reward,
                state.error_msg,
                n,
            )


_missing_labels = SparseLog()


def warn_missing_labels(data_sources: Sequence[Any], ground_truths: Sequence[Any]) -> None:
    """verl scores a sample without a label as its scorer compares with None (usually 0): say so."""
    for data_source, label in zip(data_sources, ground_truths):
        if label is None:
            n = _missing_labels.tick()
            if n is not None:
                logger.warning(
                    "judger: a sample of data_source=%r has no label (reward_model.ground_truth is None); "
                    "it scores as verl scores it, or fails (%d such samples so far)",
                    data_source,
                    n,
                )


Row = tuple[Any, Any, Any, Any]
"""``(data_source, response text, ground truth, extra_info)``: one sample as verl hands it over."""


def states_of(rows: Sequence[Row]) -> list[RolloutState]:
    """The rows as COMPLETED states (:func:`to_state` each); built without a second validation where
    every value is already of its field's type (a string data source and response), as verl's
    batches give them."""
    completed = Status.COMPLETED
    values = []
    for ds, text, truth, info in rows:
        if type(ds) is not str or type(text) is not str:
            return [to_state(*row) for row in rows]
        has_info = info and (type(info) is dict or isinstance(info, Mapping))
        question = info.get("question") if has_info else None
        values.append(
            {
                "data_source": ds,
                "message": [{"role": "user", "content": question}] if isinstance(question, str) else [],
                "response": text,
                "reward_model": {"ground_truth": truth},
                "status": completed,
                "extra_fields": {"extra_info": dict(info)} if has_info else {},
            }
        )
    return RolloutState.from_checked_many(values)


async def score_rows(judger: BaseJudger, rows: Sequence[Row]) -> list[RolloutState]:
    """Every row judged in one ``batch_judge`` of ``judger``: what each of verl's calling
    conventions (the managers, ``default_compute_score_batch``) reduces its batch to."""
    if not rows:
        return []
    warn_missing_labels([row[0] for row in rows], [row[2] for row in rows])
    return await judger.batch_judge(states_of(rows))


class Failures:
    """What a sample the judger could not score gets: ``reward``'s number (by default the lowest
    score its judger gives it), logged in ``log`` with its reason; or, with ``on_failure="raise"``,
    an error."""

    def __init__(self, reward: FailureReward, log: FailureLog, on_failure: str = "lowest") -> None:
        self.reward = reward
        self.log = log
        self.on_failure = on_failure

    def outcome(self, state: RolloutState) -> tuple[float, dict[str, Any], bool]:
        """``(score, reward dict, failed)`` of one judged state; a failed state's dict is
        ``{score, acc: False, pred: None, judge_failure: <kind>}``."""
        reward = state.reward
        if reward is not None:
            score = float(reward["score"])
            self.reward.watch(state, score)
            return score, reward, False
        if self.on_failure == "raise":
            raise ValueError(
                f"{self.log.name}: a sample of data_source={state.data_source!r} could not be scored "
                f"(on_failure='raise'): {state.error_msg}"
            )
        score = self.reward.of(state)
        self.log.record(state, score)
        failure = state.extra_fields.get(FAILURE_KEY) or {}
        return (
            score,
            {"score": score, "acc": False, "pred": None, FAILURE_KEY: failure.get("kind", "error")},
            True,
        )
