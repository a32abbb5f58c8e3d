"""Micro-batching: concurrent single requests judged as one ``batch_judge``.

Trainers often send one ``/reward`` request per sample, many at once. Judged one by one, each pays
the judger's per-call overhead (a pool hand-off, a Ray call); the requests that arrive together
(in the same event-loop turn, or within ``window`` seconds) are judged as one batch instead, by
:class:`judger.core.batching.MicroBatcher`. A batch runs in a task of its own, so a request whose
client goes away does not cancel the requests batched with it.

Per-sample isolation is the judger's contract (``batch_judge`` fails a sample, never the batch,
under ``on_error="fail"``); a judger built with ``on_error="raise"`` raises for the whole batch, so
a batch that raises is judged again one sample at a time and each request gets its own outcome.
"""

from __future__ import annotations

import asyncio

from judger.core import batching
from judger.core.judger import BaseJudger
from judger.core.rollout import RolloutState


class MicroBatcher:
    """``await batcher.judge(state)``: judged together with the states submitted alongside it
    (``max_batch=1``: judged alone, as a generic judger's batch would share one deadline)."""

    def __init__(self, judger: BaseJudger, *, window: float = 0.0, max_batch: int = 256) -> None:
        if window < 0 or max_batch < 1:
            raise ValueError("window must be >= 0 and max_batch >= 1")
        self.judger = judger
        self.window = window
        self.max_batch = max_batch
        self._batcher: batching.MicroBatcher[RolloutState, RolloutState | BaseException] = (
            batching.MicroBatcher(self._judge_all, window_s=window, max_batch=max_batch)
        )

    async def judge(self, state: RolloutState) -> RolloutState:
        if self.max_batch == 1:
            return await self.judger.judge(state)
        result = await self._batcher.submit(state)
        if isinstance(result, BaseException):
            raise result
        return result

    async def _judge_all(self, states: list[RolloutState]) -> list[RolloutState | BaseException]:
        if len(states) == 1:
            return [await self.judger.judge(states[0])]
        try:
            return list(await self.judger.batch_judge(states))
        except Exception:
            # on_error="raise": one sample's exception must not answer its neighbours' requests
            return list(await asyncio.gather(*(self.judger.judge(s) for s in states), return_exceptions=True))
