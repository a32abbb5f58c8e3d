"""JudgerActor: the Ray actor that runs a local judger's ``judge_payload`` for remote callers."""

from __future__ import annotations

import math
import os
import sys
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
        _size_pool_to_reserved_cpus(self.judger)
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
            "pool_workers": _pool_workers(),
        }

    async def aclose(self) -> None:
        await self.judger.aclose()


def _size_pool_to_reserved_cpus(judger: Any) -> None:
    """In a Ray actor, a judger that scores on the shared worker processes gets as many of them as
    the CPUs the actor reserved, not one per core of the node (as its threads do, see
    ``judger.remote.build._actor_config``)."""
    from judger.judgers.composed import leaf_judgers

    if not any(getattr(leaf, "execution", None) == "process" for leaf in leaf_judgers(judger)):
        return
    try:
        import ray

        cpus = ray.get_runtime_context().get_assigned_resources().get("CPU")
    except Exception:  # not in a Ray worker
        return
    if cpus:
        from judger.runtime.procpool.shared import configure_shared_pool, shared_pool_options

        options = shared_pool_options()
        if "workers" not in options:
            configure_shared_pool(**{**options, "workers": max(1, math.ceil(cpus))})


def _pool_workers() -> int:
    """The size of this process's shared worker-process pool (0: no pool was asked for)."""
    shared = sys.modules.get("judger.runtime.procpool.shared")
    if shared is None:
        return 0
    return int(shared.shared_pool_options().get("workers") or os.cpu_count() or 1)
