"""Calls that each run an untrusted program in a sandbox of its own, a bounded number at once.

A call (``fn(item)``, ``fn`` an async function that starts its sandbox, as
:func:`judger.scorers.code.score_async` does) runs under the deadline in one of ``max_parallel``
slots. The kernel's teardown of a call's
sandbox is waited for after the deadline, not inside it (whatever the program left behind, its call
ends as its verdict), and not in the call's slot either: the call takes a teardown slot
(``max_parallel`` of them) before it gives its slot to the next one, so a teardown the kernel
stalls holds back new calls only once ``max_parallel`` of them are stalled. A batch returns once
all of its teardowns are done. With ``limits`` (local sandboxes), the next calls' sandboxes start
while the current ones run (:func:`~judger.runtime.sandbox.runner.prepared_ahead`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from judger.core.deadlines import judge_deadline
from judger.core.loops import LoopLocal
from judger.runtime.sandbox.runner import SandboxLimits, prepared_ahead, teardowns_collected, wait_torn_down


class SandboxExecutor:
    """``await fn(item)`` for each item, at most ``max_parallel`` at once per event loop,
    each under the deadline (a JudgeTimeoutError naming ``name``). ``limits``: the local sandboxes'
    (None: the calls run their programs elsewhere, e.g. on a SandboxFusion server)."""

    travels = False

    def __init__(self, name: str, *, max_parallel: int, limits: SandboxLimits | None = None) -> None:
        self.name = name
        self.max_parallel = max_parallel
        self.limits = limits
        self._slots = LoopLocal(lambda: asyncio.Semaphore(self.max_parallel))
        self._tearing = LoopLocal(lambda: asyncio.Semaphore(self.max_parallel))

    async def _one(self, fn: Any, item: Any, deadline: float) -> Any:
        tearing = self._tearing.get()
        async with self._slots.get():
            with teardowns_collected() as pending:
                result = await self._judged(fn, item, deadline)
            # the next call starts while the kernel takes this one's sandbox down
            await tearing.acquire()
        try:
            await wait_torn_down(pending)
        finally:
            tearing.release()
        return result

    async def _judged(self, fn: Any, item: Any, deadline: float) -> Any:
        try:
            async with judge_deadline(self.name, deadline):
                return await fn(item)
        except Exception as exc:
            return exc

    async def run(self, fn: Any, items: Sequence[Any], deadline: float) -> list[Any]:
        if self.limits is None or len(items) <= 1:
            return list(await asyncio.gather(*(self._one(fn, item, deadline) for item in items)))
        # the next calls' sandboxes start while the current ones run (one per slot)
        async with prepared_ahead(self.limits, ahead=self.max_parallel, samples=len(items)):
            return list(await asyncio.gather(*(self._one(fn, item, deadline) for item in items)))

    async def call_batch(self, fn: Any, item: Any, deadline: float, size: int) -> Any:
        (result,) = await self.run(fn, [item], deadline)
        if isinstance(result, BaseException):
            raise result
        return result

    async def aclose(self) -> None:
        return None
