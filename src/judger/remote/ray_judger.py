"""What RemoteJudger and JudgerPool share: driver-side pre/postprocess, remote payloads, shutdown."""

from __future__ import annotations

import math
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from judger.core.judger import (
    BatchJudger,
    Judger,
    JudgerOutput,
    JudgerPayload,
)
from judger.core.rollout import RolloutState
from judger.remote.dispatch import Dispatcher

# Added to every remote call's deadline: Ray's own latency, and an actor's restart after a crash.
CALL_GRACE_S = 10.0


def default_call_timeout(local: Judger, threads: int | None = None) -> Callable[[int], float]:
    """The outer deadline of a call carrying n payloads, from the local judger's own deadline.

    Per-sample deadlines apply inside the actor; this one only catches an actor that died silently
    or whose event loop is blocked. A call of n payloads may need ``ceil(n / parallelism)`` rounds
    of the inner deadline, plus one more for the queue, plus a fixed grace. ``threads``: the
    actor's own ``num_threads`` when it differs from the driver's instance.
    """
    threads = threads or getattr(local, "num_threads", None) or local.max_concurrency
    parallel = max(1, min(local.max_concurrency, threads))
    timeout = local.timeout

    def call_timeout(n: int) -> float:
        return timeout * (1 + math.ceil(n / parallel)) + CALL_GRACE_S

    return call_timeout


class RayJudger(BatchJudger):
    """A Judger whose ``judge_payload`` runs on JudgerActors; the rest runs on the driver.

    ``preprocess`` and ``postprocess`` are those of ``local``, a driver-side instance of the same
    judger, so custom Judger subclasses keep their own; only payloads cross to the actors.
    """

    delegates_hooks = True  # the batch driver calls local's pre/postprocess, with its shortcuts

    def __init__(self, local: Judger, dispatcher: Dispatcher, judger_name: str | None = None) -> None:
        super().__init__(
            judger_name or local.judger_name,
            on_error=local.on_error,
            timeout=local.timeout,
            max_concurrency=local.max_concurrency,
        )
        self.local = local
        self.dispatcher = dispatcher
        # a Ray call costs milliseconds: concurrent judge() calls travel together
        self.micro_batch_window_s = 0.0
        self._closed = False
        self._release_registration: weakref.finalize | None = None
        self.resource_name: str | None = None

    # --- the payload contract, split between driver and actors -----------------------------------

    def preprocess(self, rollout_state: RolloutState) -> JudgerPayload:
        return self.local.preprocess(rollout_state)

    def lowest_score_for(self, rollout_state: RolloutState) -> float | None:
        if self.lowest_score is not None:
            return self.lowest_score
        return self.local.lowest_score_for(rollout_state)

    def postprocess(
        self, rollout_state: RolloutState, output: JudgerOutput
    ) -> RolloutState | Awaitable[RolloutState]:
        return self.local.postprocess(rollout_state, output)

    async def run_payload(self, payload: JudgerPayload) -> JudgerOutput:
        return await self.dispatcher.run_one(payload)

    async def _judge_batch(self, payloads: list[JudgerPayload]) -> list[Any]:
        # the actors validate, dedup and capture per sample; failures come back as JudgeFailures
        return await self.dispatcher.run_many(payloads)

    # --- status and shutdown ---------------------------------------------------------------------

    def get_worker_status(self) -> dict[str, int]:
        """Payloads in flight per replica, as ``{"name[i]": n}`` (XTuner's shape)."""
        return {r.name: r.in_flight for r in self.dispatcher.replicas}

    def worker_stats(self) -> dict[str, dict[str, Any]]:
        """Per replica: in flight, completed payloads, lost and hung calls, health."""
        return {r.name: r.status() for r in self.dispatcher.replicas}

    def attach_registration(self, name: str, release: Callable[[str], object]) -> None:
        """Release resource registration ``name`` when this judger closes or is garbage-collected."""
        self.resource_name = name
        self._release_registration = weakref.finalize(self, release, name)

    def _kill_actors(self) -> None:
        raise NotImplementedError

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._kill_actors()
        if self._release_registration is not None:
            self._release_registration()
        await self.dispatcher.wake_all()
        await self.local.aclose()

    @property
    def closed(self) -> bool:
        return self._closed
