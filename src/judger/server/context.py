"""What every protocol route of one server shares: the judger, its batcher, metrics and limits.

One :class:`ServerContext` per app, kept on ``app.state.server``; routes take it as a FastAPI
dependency (:func:`server_context`), and the guard's direct path binds it to each protocol's
handler, so no endpoint is a closure over the app factory's locals.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request

from judger.core.failure_reward import LOWEST, FailureReward, FailureRewardSetting, check_failure_reward
from judger.core.judger import BaseJudger
from judger.core.rollout import RolloutState
from judger.presets.base import ScorerJudger
from judger.presets.inline import InlineScorerJudger
from judger.server.batching import MicroBatcher
from judger.server.body import BodyLimits
from judger.server.metrics import ServerMetrics
from judger.server.openrlhf import GetRewardReader
from judger.server.parsing import BodyParser
from judger.server.recorder import Recorder

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_IN_FLIGHT_REQUESTS = 512
DEFAULT_FAILURE_REWARD: FailureRewardSetting = LOWEST
DEFAULT_LOG_KEYS = ("acc",)

Handler = Callable[["ServerContext", bytes, bytes], Awaitable[tuple[int, Any]]]
"""A protocol's ``handle(context, body, query_string) -> (status, JSON content)``."""


@dataclass(frozen=True, eq=False)
class ServerContext:
    judger: BaseJudger
    name: str
    metrics: ServerMetrics
    recorder: Recorder
    batcher: MicroBatcher
    parser: BodyParser
    limits: BodyLimits
    reader: GetRewardReader
    failure_reward: FailureReward | None
    """/get_reward's number for a failed sample; None: such a request answers 5xx."""
    log_keys: tuple[str, ...]
    max_concurrency: int
    # an inline preset that scores /judge's validated fields without building states, or None
    field_judger: InlineScorerJudger | None
    close_judger: bool = True

    async def judge_many(self, states: list[RolloutState]) -> list[RolloutState]:
        """A batch as one ``batch_judge``; a single state through the micro-batcher."""
        if len(states) > 1:
            return await self.judger.batch_judge(states)
        return [await self.batcher.judge(s) for s in states]

    def attach(self, app: FastAPI) -> None:
        """Serve this context from ``app`` (``judger``, ``metrics``, ``batcher`` stay readable
        there too)."""
        app.state.server = self
        app.state.judger = self.judger
        app.state.metrics = self.metrics
        app.state.batcher = self.batcher

    async def aclose(self) -> None:
        await self.parser.aclose()
        if self.close_judger:
            await self.judger.aclose()


def server_context(request: Request) -> ServerContext:
    """The FastAPI dependency of every route: the context its app serves."""
    context: ServerContext = request.app.state.server
    return context


def check_options(max_body_bytes: int, max_concurrency: int, failure_reward: Any) -> None:
    """Refuse limits no server could keep (before a judger is built for them)."""
    if max_body_bytes < 1 or max_concurrency < 1:
        raise ValueError("max_body_bytes and max_concurrency must be >= 1")
    if failure_reward is not None:
        check_failure_reward(failure_reward, "failure_reward")


def build_context(
    judger: BaseJudger,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_concurrency: int = DEFAULT_MAX_IN_FLIGHT_REQUESTS,
    body_limits: BodyLimits | None = None,
    failure_reward: FailureRewardSetting | None = DEFAULT_FAILURE_REWARD,
    batch_window: float = 0.0,
    max_batch: int = 256,
    log_keys: Sequence[str] = DEFAULT_LOG_KEYS,
    micro_batch: bool | None = None,
    get_reward_reader: GetRewardReader | None = None,
    close_judger: bool = True,
) -> ServerContext:
    """The context serving ``judger``; the options are :func:`~judger.server.app.create_app`'s."""
    check_options(max_body_bytes, max_concurrency, failure_reward)
    limits = body_limits or BodyLimits(max_string_chars=max_body_bytes)
    name = judger.get_judger_name()
    metrics = ServerMetrics()
    if micro_batch is None:
        # only where a batch keeps per-sample deadlines: a generic Judger's batch call shares one
        # deadline, so one slow request could time out the requests batched with it
        micro_batch = isinstance(judger, ScorerJudger)
    reader = get_reward_reader or GetRewardReader()
    reader.check(judger)
    return ServerContext(
        judger=judger,
        name=name,
        metrics=metrics,
        recorder=Recorder(metrics, name),
        batcher=MicroBatcher(judger, window=batch_window, max_batch=max_batch if micro_batch else 1),
        parser=BodyParser(limits, max_body_bytes),
        limits=limits,
        reader=reader,
        failure_reward=(
            None if failure_reward is None else FailureReward(failure_reward, judger, "failure_reward")
        ),
        log_keys=tuple(dict.fromkeys(k for k in log_keys if k not in ("score", "judge_failed"))),
        max_concurrency=max_concurrency,
        field_judger=judger if isinstance(judger, InlineScorerJudger) and judger.judges_fields() else None,
        close_judger=close_judger,
    )
