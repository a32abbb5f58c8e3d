"""Batch plumbing written once: dedup of a payload batch, and micro-batching of concurrent singles.

- :func:`dedup` keeps the first payload of each key (GRPO groups repeat answers); the caller runs
  only those and fans the results out.
- :class:`MicroBatcher` groups single calls that arrive in the same event-loop turn (or within a
  small window) into one batch call: 2,000 concurrent ``judge()`` calls through a Ray pool or a
  process pool then cost a few batch calls, not 2,000 round trips.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Generic, TypeVar

from judger.core.loops import LoopLocal

P = TypeVar("P")
R = TypeVar("R")

DEFAULT_MAX_BATCH = 4096


def dedup(items: Sequence[P], key: Callable[[P], Hashable | None]) -> tuple[list[P], list[int] | None]:
    """``(unique, slots)``: ``items[i]`` is answered by ``unique[slots[i]]``; ``slots`` is None when
    every item is distinct. A key of None never matches another item."""
    owners: dict[Hashable, int] = {}
    unique: list[P] = []
    slots: list[int] = []
    for item in items:
        k = key(item)
        if k is None:
            slots.append(len(unique))
            unique.append(item)
            continue
        slot = owners.get(k)
        if slot is None:
            slot = owners[k] = len(unique)
            unique.append(item)
        slots.append(slot)
    return unique, (None if len(unique) == len(items) else slots)


class _Pending(Generic[P, R]):
    __slots__ = ("futures", "handle", "items", "tasks")

    def __init__(self) -> None:
        self.items: list[P] = []
        self.futures: list[asyncio.Future[R]] = []
        self.handle: asyncio.Handle | None = None
        self.tasks: set[asyncio.Task[None]] = set()


class MicroBatcher(Generic[P, R]):
    """``await submit(item)`` -> that item's entry of one ``run_batch(items)`` call.

    Items submitted before the loop's next turn (``window_s=0``) or within ``window_s`` seconds of
    the first one travel together, at most ``max_batch`` at a time. ``run_batch`` must return one
    result per item; if it raises, every caller of that batch gets the exception, so give it a
    batch function that reports per-item failures as values.
    """

    def __init__(
        self,
        run_batch: Callable[[list[P]], Awaitable[Sequence[R]]],
        *,
        window_s: float = 0.0,
        max_batch: int = DEFAULT_MAX_BATCH,
    ) -> None:
        if window_s < 0 or max_batch < 1:
            raise ValueError(f"window_s must be >= 0 and max_batch >= 1; got {window_s}, {max_batch}")
        self.run_batch = run_batch
        self.window_s = window_s
        self.max_batch = max_batch
        self._pending: LoopLocal[_Pending[P, R]] = LoopLocal(_Pending)
        self.batches = 0  # batch calls made (for tests and benchmarks)

    def submit(self, item: P) -> asyncio.Future[R]:
        """The future of ``item``'s result (a plain method, not a coroutine: a batch of thousands
        of callers should not pay for a coroutine each)."""
        pending = self._pending.get()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        pending.items.append(item)
        pending.futures.append(future)
        if len(pending.items) >= self.max_batch:
            self._flush(pending)
        elif pending.handle is None:
            if self.window_s > 0:
                pending.handle = loop.call_later(self.window_s, self._flush, pending)
            else:
                pending.handle = loop.call_soon(self._flush, pending)
        return future

    def _flush(self, pending: _Pending[P, R]) -> None:
        if pending.handle is not None:
            pending.handle.cancel()
            pending.handle = None
        items, futures = pending.items, pending.futures
        if not items:
            return
        pending.items, pending.futures = [], []
        self.batches += 1
        task = asyncio.get_running_loop().create_task(self._run(items, futures))
        pending.tasks.add(task)  # keep a reference until it is done
        task.add_done_callback(pending.tasks.discard)

    async def _run(self, items: list[P], futures: list[asyncio.Future[R]]) -> None:
        try:
            results = await self.run_batch(items)
            if len(results) != len(items):
                raise RuntimeError(f"batch function returned {len(results)} results for {len(items)} items")
        except BaseException as exc:
            for future in futures:
                if not future.done():
                    future.set_exception(exc)
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            return
        for future, result in zip(futures, results):
            if not future.done():  # a caller that was cancelled no longer waits
                future.set_result(result)
