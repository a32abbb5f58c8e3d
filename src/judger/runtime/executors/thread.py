"""Sync calls on a budget of worker threads, each under a deadline from when it starts.

The calls of a batch share up to ``num_threads`` lanes (one per thread, see :class:`_Lane`); the
async side sleeps until the call a lane is on would overrun, fails that call with a timeout,
abandons its lane (its thread counted hung by :class:`~judger.runtime.threads.HandlerThreads`) and
starts a fresh lane for the rest. A Python thread cannot be killed, so only calls declared safe
(they always return), or that no worker process can load, come here.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from judger.core.deadlines import judge_deadline
from judger.core.errors import JudgeTimeoutError
from judger.runtime.threads import DEFAULT_MAX_HUNG, HandlerThreads, Job, ThreadBudgetError

# A result slot no lane has filled yet (None is a handler's possible, if invalid, result).
_PENDING: Any = object()
# A batch runs on one lane for this long before the others start (see ThreadExecutor._watch_lanes).
_RAMP_S = 0.002


class _Lane:
    """One worker thread's share of a batch: it takes the batch's next index until none is left.

    Lanes pull from one shared index iterator, so a batch costs one thread hand-off per lane, not
    one per chunk (a hand-off costs more than scoring a few hundred trivial samples). Only the
    driver writes ``failed``, only the thread ``current``: an abandoned lane writes no result for
    the item it was failed for and takes no other, and the driver waits for any slot still
    pending, so an item taken just as its lane was abandoned is never lost.
    """

    __slots__ = ("current", "failed", "future", "job", "started")
    future: asyncio.Future[None]  # the thread's run, set when it is submitted
    job: Job | None  # None when no thread could take it (the future holds why)

    def __init__(self) -> None:
        # (index, since) of the item being scored; None before the thread starts and after it ends.
        # Time spent queued (behind other work, or a hung call) never counts against a deadline.
        self.current: tuple[int, float] | None = None
        self.failed: int | None = None  # the index failed for overrunning: the lane is abandoned
        self.started: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def mark_started(self) -> None:
        """Called on the worker thread when it starts: wakes the driver to watch the deadline."""
        loop = self.started.get_loop()
        try:
            loop.call_soon_threadsafe(_set_once, self.started)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass

    def abandoned_on_failed(self) -> bool:
        """Failed for overrunning and still on that item (or ended): nothing more to wait for."""
        current = self.current
        return self.failed is not None and (current is None or current[0] == self.failed)


def _set_once(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _score_lane(
    lane: _Lane,
    indices: Iterator[int],
    fn: Callable[[Any], Any],
    items: Sequence[Any],
    results: list[Any],
) -> None:
    """A lane's thread: score the batch's next item until none is left or the lane is abandoned."""
    if lane.failed is not None:  # its batch was cancelled while the lane queued for a thread
        return
    first = True
    for index in indices:
        lane.current = (index, time.monotonic())
        if first:
            lane.mark_started()  # after ``current`` is set: the driver then sees the deadline
            first = False
        try:
            result = fn(items[index])
        except Exception as exc:
            result = exc
        failed = lane.failed
        if failed is not None:  # abandoned while on this item (or just before it)
            if failed != index:
                results[index] = result
            break
        results[index] = result
    lane.current = None


class ThreadExecutor:
    """``fn(item)`` on ``num_threads`` daemon threads, with at most ``max_hung`` threads
    left to calls that overran their deadline (see :class:`~judger.runtime.threads.HandlerThreads`);
    ``name`` names the threads and the timeouts."""

    travels = False

    def __init__(self, name: str, num_threads: int, max_hung: int = DEFAULT_MAX_HUNG) -> None:
        self.name = name
        self.num_threads = num_threads
        self.max_hung = max_hung
        self._threads: HandlerThreads | None = None

    @property
    def threads(self) -> HandlerThreads:
        """The thread budget, started on first use."""
        if self._threads is None:
            self._threads = HandlerThreads(self.num_threads, self.max_hung, name=f"judger-{self.name}")
        return self._threads

    async def call_batch(self, fn: Any, item: Any, deadline: float, size: int) -> Any:
        """One call on a thread under one deadline from now; a caller that stops waiting abandons it."""
        async with judge_deadline(self.name, deadline, f"batch of {size}"):
            job = self.threads.submit(fn, item)
            try:
                return await asyncio.wrap_future(job.future)
            except asyncio.CancelledError:
                self.threads.abandon(job)
                raise

    async def aclose(self) -> None:
        threads, self._threads = self._threads, None
        if threads is not None:
            threads.shutdown()  # never waits: a hung call's daemon thread is left to itself

    async def run(self, fn: Any, items: Sequence[Any], deadline: float) -> list[Any]:
        """``fn(item)`` for each item on worker threads, with a deadline per call.

        Up to ``num_threads`` lanes (one per thread) take the batch's items in turn; the first
        starts at once, the others 2 ms later if the batch is still running. The async side
        sleeps until the item a lane is on would overrun its deadline; if that item is still
        running then, it is failed with a timeout, the lane is abandoned (its thread counted hung
        by :class:`~judger.runtime.threads.HandlerThreads`), and a fresh lane takes over the rest.
        A Python thread cannot be killed, so the stuck call is abandoned, not stopped; once every
        thread of the budget is hung, the remaining items fail with ThreadBudgetError.
        """
        n = len(items)
        results: list[Any] = [_PENDING] * n
        indices = iter(range(n))  # shared by the lanes: next() on it is atomic under the GIL

        def start() -> _Lane:
            lane = _Lane()
            try:
                lane.job = self.threads.submit(_score_lane, lane, indices, fn, items, results)
            except ThreadBudgetError as exc:
                lane.job = None
                lane.future = asyncio.get_running_loop().create_future()
                lane.future.set_exception(exc)
            else:
                lane.future = asyncio.wrap_future(lane.job.future)
            return lane

        lanes = [start()]
        try:
            await self._watch_lanes(lanes, start, results, indices, min(self.num_threads, n), deadline)
        except BaseException:
            for lane in lanes:  # cancelled (an outer deadline): the lanes take no more items
                lane.failed = -1
                if lane.job is not None:  # one still in a call holds its thread until it returns
                    self.threads.abandon(lane.job, overran=False)
            raise
        return results

    async def _watch_lanes(
        self,
        lanes: list[_Lane],
        start: Callable[[], _Lane],
        results: list[Any],
        indices: Iterator[int],
        wanted: int,
        deadline: float,
    ) -> None:
        # one lane first; the others only if the batch is still running after _RAMP_S: a batch of
        # cheap calls is then done on one thread, without a hand-off to each of the others
        ramp_at = time.monotonic() + _RAMP_S if wanted > 1 else math.inf
        while True:
            now = time.monotonic()
            if now >= ramp_at:
                ramp_at = math.inf
                running = sum(1 for lane in lanes if not lane.future.done() and lane.failed is None)
                lanes.extend(start() for _ in range(wanted - running))
            wait_on, wake_at = self._inspect_lanes(lanes, start, results, indices, now, ramp_at, deadline)
            if not wait_on:
                if not any(r is _PENDING for r in results):  # by identity: results may be anything
                    return
                # a lane took an item just as it was abandoned: it is about to show it in `current`
                wake_at = min(wake_at, now + 0.001)
            if wake_at > now:
                timeout = None if wake_at == math.inf else wake_at - now
                if wait_on:
                    await asyncio.wait(wait_on, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                else:
                    await asyncio.sleep(wake_at - now)

    def _inspect_lanes(
        self,
        lanes: list[_Lane],
        start: Callable[[], _Lane],
        results: list[Any],
        indices: Iterator[int],
        now: float,
        wake_at: float,
        deadline: float,
    ) -> tuple[list[asyncio.Future[None]], float]:
        """What to wait on, and until when; an overdue item fails here and its lane is replaced."""
        wait_on: list[asyncio.Future[None]] = []
        for k, lane in enumerate(lanes):
            if lane.abandoned_on_failed():
                continue
            if lane.future.done():
                if not lane.future.cancelled():
                    error = lane.future.exception()
                    if isinstance(error, ThreadBudgetError):
                        for index in indices:  # no thread is left to take them: they fail now
                            results[index] = error
                    elif error is not None:
                        raise error  # a bug in the lane itself (handler errors are results)
                    continue
                lane = lanes[k] = start()  # cancelled while it queued: resubmit it
            current = lane.current
            if current is None:
                if not lane.started.done():
                    wait_on.append(lane.started)  # queued: no deadline until a thread takes it
            elif current[1] + deadline <= now:
                # overdue: fail that item, abandon the lane, and let a fresh one take the rest
                lane.failed = current[0]
                results[current[0]] = JudgeTimeoutError(self.name, deadline)
                if lane.job is not None:
                    self.threads.abandon(lane.job)  # the call still holds its thread
                lanes.append(start())
                wake_at = now  # look at the lanes again, the new one included
                continue
            else:
                wake_at = min(wake_at, current[1] + deadline)
            wait_on.append(lane.future)
        return wait_on, wake_at
