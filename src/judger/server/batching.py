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

_Group = list[tuple[RolloutState, "asyncio.Future[RolloutState] | None"]]


class MicroBatcher:
    """``await batcher.judge(state)``: judged together with the states submitted alongside it.

    The first request of a group leads it: it yields the event loop once (or sleeps ``window``
    seconds) while later requests join, then judges the group and hands each follower its state.
    No task or timer per request: a lone request costs one extra event-loop turn.
    """

    def __init__(self, judger: BaseJudger, *, window: float = 0.0, max_batch: int = 256) -> None:
        if window < 0 or max_batch < 1:
            raise ValueError("window must be >= 0 and max_batch >= 1")
        self.judger = judger
        self.window = window
        self.max_batch = max_batch
        self._open: _Group | None = None
        self._orphans: set[asyncio.Future[None]] = set()

    async def judge(self, state: RolloutState) -> RolloutState:
        if self.max_batch == 1:
            return await self.judger.judge(state)
        group = self._open
        if group is not None and len(group) < self.max_batch:
            future: asyncio.Future[RolloutState] = asyncio.get_running_loop().create_future()
            group.append((state, future))
            return await future
        group = self._open = [(state, None)]
        try:
            await asyncio.sleep(self.window)
        except BaseException:
            # the leader was cancelled while collecting: its followers are judged without it
            if self._open is group:
                self._open = None
            if len(group) > 1:
                task = asyncio.ensure_future(self._settle(group[1:]))
                self._orphans.add(task)
                task.add_done_callback(self._orphans.discard)
            raise
        if self._open is group:
            self._open = None
        if len(group) == 1:
            return await self.judger.judge(state)
        try:
            results = await self._judge_all([s for s, _ in group])
        except BaseException as exc:
            for _, follower in group[1:]:
                if follower is not None and not follower.done():
                    follower.set_exception(exc if isinstance(exc, Exception) else RuntimeError("cancelled"))
            raise
        for (_, follower), result in zip(group[1:], results[1:]):
            if follower is not None and not follower.done():
                if isinstance(result, BaseException):
                    follower.set_exception(result)
                else:
                    follower.set_result(result)
        if isinstance(results[0], BaseException):
            raise results[0]
        return results[0]

    async def _settle(self, group: _Group) -> None:
        results = await self._judge_all([s for s, _ in group])
        for (_, future), result in zip(group, results):
            if future is not None and not future.done():
                if isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result)

    async def _judge_all(self, states: list[RolloutState]) -> list[RolloutState | BaseException]:
        try:
            return list(await self.judger.batch_judge(states))
        except Exception:
            # on_error="raise": one sample's exception must not answer its neighbours' requests
            return list(await asyncio.gather(*(self.judger.judge(s) for s in states), return_exceptions=True))
