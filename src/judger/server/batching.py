"""Micro-batching: concurrent single requests judged as one ``batch_judge``.

Trainers often send one ``/reward`` request per sample, many at once. Judged one by one, each pays
the judger's per-call overhead (a pool hand-off, a Ray call); the requests that arrive together
(in the same event-loop turn, or within ``window`` seconds) are judged as one batch instead.

Per-sample isolation is the judger's contract (``batch_judge`` fails a sample, never the batch,
under ``on_error="fail"``); a judger built with ``on_error="raise"`` raises for the whole batch, so
a batch that raises is judged again one sample at a time and each request gets its own outcome.
"""

from __future__ import annotations

import asyncio

from judger.core.judger import BaseJudger
from judger.core.rollout import RolloutState


class MicroBatcher:
    """``await batcher.judge(state)``: judged together with the states submitted alongside it."""

    def __init__(self, judger: BaseJudger, *, window: float = 0.0, max_batch: int = 256) -> None:
        if window < 0 or max_batch < 1:
            raise ValueError("window must be >= 0 and max_batch >= 1")
        self.judger = judger
        self.window = window
        self.max_batch = max_batch
        self._pending: list[tuple[RolloutState, asyncio.Future[RolloutState]]] = []
        self._scheduled = False
        self._tasks: set[asyncio.Future[None]] = set()

    async def judge(self, state: RolloutState) -> RolloutState:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[RolloutState] = loop.create_future()
        self._pending.append((state, future))
        if len(self._pending) >= self.max_batch:
            self._flush()
        elif not self._scheduled:
            self._scheduled = True
            if self.window > 0:
                loop.call_later(self.window, self._flush)
            else:
                loop.call_soon(self._flush)
        return await future

    def _flush(self) -> None:
        batch, self._pending = self._pending, []
        self._scheduled = False
        if batch:
            task = asyncio.ensure_future(self._run(batch))
            self._tasks.add(task)  # the loop keeps only weak references to tasks
            task.add_done_callback(self._tasks.discard)

    async def _run(self, batch: list[tuple[RolloutState, asyncio.Future[RolloutState]]]) -> None:
        states = [state for state, _ in batch]
        try:
            if len(states) == 1:
                judged = [await self.judger.judge(states[0])]
            else:
                judged = await self.judger.batch_judge(states)
        except Exception:
            # on_error="raise": one sample's exception must not answer its neighbours' requests
            await asyncio.gather(*(self._run_one(state, future) for state, future in batch))
            return
        except BaseException as exc:  # cancelled at shutdown: nobody waits forever
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc if isinstance(exc, Exception) else RuntimeError(str(exc)))
            raise
        for (_, future), state in zip(batch, judged):
            if not future.done():
                future.set_result(state)

    async def _run_one(self, state: RolloutState, future: asyncio.Future[RolloutState]) -> None:
        try:
            result = await self.judger.judge(state)
        except Exception as exc:
            if not future.done():
                future.set_exception(exc)
            return
        if not future.done():
            future.set_result(result)
