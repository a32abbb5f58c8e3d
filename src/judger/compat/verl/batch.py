"""Judge a batch of verl samples with a judger and hand back what verl needs: a number per sample.

Shared by :func:`~judger.compat.verl.compute_score.default_compute_score_batch` and the reward
managers. A sample the judger cannot score (FAILED) gets ``failure_score`` (by default the lowest
score its route gives, :mod:`judger.core.failure_reward`) and a ``judge_failure`` entry naming the
failure kind, and the failure is logged with its message: verl needs a number in the reward tensor,
and the user needs to hear about it.
"""

from __future__ import annotations

import logging
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from judger.compat.verl.default_options import DefaultOptions
from judger.compat.verl.result import RESULT_KEYS, VerlScore
from judger.core import loops
from judger.core.failure_reward import FailureReward, FailureRewardSetting
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


def overlong_penalty(length: int, max_resp_len: int, buffer_len: int, factor: float) -> float:
    """verl's DAPO overlong penalty (<= 0) for a response of ``length`` valid tokens: linear over the
    last ``buffer_len`` tokens before ``max_resp_len``, ``-factor`` at the limit."""
    exceed = length - (max_resp_len - buffer_len)
    return min(-exceed / buffer_len * factor, 0.0)


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


def result_of(state: RolloutState, failure_score: float, keys: Sequence[str] | None) -> dict[str, Any]:
    """``{"score": number, ...}`` for one judged state; only ``keys`` (in that order) when given."""
    if state.reward is None:
        failure = state.extra_fields.get(FAILURE_KEY) or {}
        result: dict[str, Any] = {
            "score": float(failure_score),
            "acc": False,
            "pred": None,
            FAILURE_KEY: failure.get("kind", "error"),
        }
    else:
        result = {**state.reward, FAILURE_KEY: None}
    if keys is None:
        return result
    return {key: result.get(key) for key in keys}


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


async def judge_rows(
    judger: BaseJudger,
    data_sources: Sequence[Any],
    responses: Sequence[Any],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Any] | None,
) -> list[RolloutState]:
    n = len(data_sources)
    if not len(responses) == len(ground_truths) == n or (extra_infos is not None and len(extra_infos) != n):
        raise ValueError(
            f"verl batch: {n} data_sources, {len(responses)} responses, {len(ground_truths)} ground_truths"
            + ("" if extra_infos is None else f", {len(extra_infos)} extra_infos")
        )
    warn_missing_labels(data_sources, ground_truths)
    infos = extra_infos if extra_infos is not None else [None] * n
    states = [to_state(*row) for row in zip(data_sources, responses, ground_truths, infos)]
    return await judger.batch_judge(states)


_router_judgers: dict[DefaultOptions, BaseJudger] = {}
_failures = FailureLog("default_compute_score_batch")


def _router(options: DefaultOptions) -> BaseJudger:
    judger = _router_judgers.get(options)
    if judger is None:
        judger = _router_judgers[options] = options.judger_config().build()
    return judger


def score_batch(
    data_sources: Sequence[Any],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Any] | None = None,
    *,
    full_output: bool = False,
    failure_score: FailureRewardSetting | None = None,
    **kwargs: Any,
) -> list[Any]:
    """See :func:`judger.compat.verl.compute_score.default_compute_score_batch`."""

    options = DefaultOptions.parse(kwargs, "default_compute_score_batch")
    judger = _router(replace(options, on_failure="lowest", as_float=False))
    setting = options.failure_reward() if failure_score is None else failure_score
    failure_reward = FailureReward(setting, judger, "failure_score", logger)
    states = run_sync(judge_rows(judger, data_sources, solution_strs, ground_truths, extra_infos))
    out: list[Any] = []
    for state in states:
        value = 0.0
        if state.reward is None:
            if options.on_failure == "raise":
                raise ValueError(f"judger: sample of data_source={state.data_source!r}: {state.error_msg}")
            value = failure_reward.of(state)
            _failures.record(state, value)
        else:
            failure_reward.watch(state, float(state.reward["score"]))
        result = result_of(state, value, None if full_output else (*RESULT_KEYS, FAILURE_KEY))
        out.append(float(result["score"]) if options.as_float else VerlScore(result))
    return out
