"""JudgerActor: the Ray actor that runs a local judger's ``judge_payload`` for remote callers."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from judger.core.judger import (
    JudgerOutput,
    JudgerOutputBatch,
    JudgerPayload,
    JudgerPayloadBatch,
    PayloadResult,
)

if TYPE_CHECKING:
    from judger.judgers.config import JudgerConfig


class JudgerActor:
    """Hosts ``judger_config.build_local()`` inside a Ray worker; only payloads come in.

    A plain class: :class:`~judger.RemoteJudger` wraps it with ``ray.remote`` and Ray's restart
    options (``judger.remote.cluster.spawn_actor``). Its methods are coroutines, so Ray runs
    it as an async actor and several payload batches overlap in one process. Per-sample deadlines,
    validation and failure capture happen here, in the local judger's ``run_payloads``, so a
    :class:`~judger.core.failure.JudgeFailure` (a small picklable value) travels back instead of an exception.
    """

    def __init__(self, judger_config: JudgerConfig) -> None:
        self.judger = self._build(judger_config)
        self._calls = 0
        self._payloads = 0
        # every top-level payload key this actor has received: shows what crosses the wire
        self._keys_seen: set[str] = set()

    def _build(self, judger_config: JudgerConfig) -> Any:
        """The judger this actor hosts (a subclass may build it otherwise)."""
        return judger_config.build_local()

    def _count(self, payloads: Sequence[JudgerPayload]) -> None:
        self._calls += 1
        self._payloads += len(payloads)
        for payload in payloads:
            self._keys_seen.update(payload)

    async def run_payloads(self, payloads: list[JudgerPayload]) -> list[PayloadResult]:
        """Each payload's validated output or its JudgeFailure, in order."""
        self._count(payloads)
        return await self.judger.run_payloads(payloads)

    async def run_payload(self, payload: JudgerPayload) -> JudgerOutput:
        """One payload's validated output; a failure raises (Ray carries the exception back)."""
        self._count([payload])
        return await self.judger.run_payload(payload)

    async def judge_payload(self, payload: JudgerPayloadBatch) -> JudgerOutputBatch:
        """XTuner's actor method: the local judger's raw ``judge_payload``."""
        self._count(payload if isinstance(payload, list) else [payload])
        return await self.judger.judge_payload(payload)

    async def stats(self) -> dict[str, Any]:
        import ray

        return {
            "pid": os.getpid(),
            "node": ray.get_runtime_context().get_node_id(),
            "judger_name": self.judger.judger_name,
            "calls": self._calls,
            "payloads": self._payloads,
            "keys_seen": sorted(self._keys_seen),
            "cpu_s": time.process_time(),
        }

    async def aclose(self) -> None:
        await self.judger.aclose()
