"""Sandboxes started ahead of the samples that take them.

A sandbox's start (bubblewrap's two stages, the supervisor's interpreter, its first worker forked)
does not depend on the sample: the program and its tests reach the supervisor on its stdin only
once a sample takes it. Within :func:`judger.runtime.sandbox.runner.prepared_ahead`, up to
``ahead`` sandboxes are started while the samples before them run, so that a sample starts on a
sandbox that is already up and its start's latency is not added to the batch's wall time.

Nothing of a sample's is in a sandbox before it is taken, so nothing can pass between samples: a
prepared sandbox is used once, by one sample, and killed with it like any other. One that died
while it waited is given back and never handed out (one whose death is not yet visible when it is
taken fails before it is ready, and the runner starts the sample its own). Those left when the
block ends (more were prepared than samples came) are given back and their teardown waited for
before it ends, so a batch leaves nothing behind. A start that fails while preparing is dropped:
the sample starts its own and meets the failure itself, with its reason.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

S = TypeVar("S")


class Ahead(Generic[S]):
    """Up to ``ahead`` sandboxes of one kind ready or starting, for the ``samples`` still to come."""

    def __init__(
        self,
        key: Any,
        ahead: int,
        samples: int,
        launch: Callable[[], Awaitable[S]],
        alive: Callable[[S], bool],
        let_go: Callable[[S], None],
    ) -> None:
        self.key = key
        self.ahead = ahead
        self.left = samples  # samples that have not taken a sandbox yet
        self._launch, self._alive, self._let_go = launch, alive, let_go
        self._loop = asyncio.get_running_loop()
        self._ready: asyncio.Queue[S | None] = asyncio.Queue()
        self._starting: set[asyncio.Task[None]] = set()
        self._waiting = 0  # takers waiting for a start already under way
        self._closed = False
        self.prepared = 0  # counters, for tests and benchmarks
        self.taken = 0

    def fill(self) -> None:
        """Start sandboxes until as many are ready or starting as the samples to come need, at most
        ``ahead``."""
        want = min(self.ahead, max(self.left, 0))
        while not self._closed and self._ready.qsize() + len(self._starting) - self._waiting < want:
            task = self._loop.create_task(self._prepare())
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)

    async def _prepare(self) -> None:
        try:
            sandbox = await self._launch()
        except asyncio.CancelledError:
            raise
        except Exception:
            sandbox = None
        finally:
            # no longer starting as soon as it is ready (its done-callback would come a turn later,
            # and a refill in between would count it twice)
            self._starting.discard(asyncio.current_task())
        if sandbox is None:
            self._ready.put_nowait(None)  # a waiting taker starts its own, and meets the reason
            return
        if self._closed:
            self._let_go(sandbox)
            return
        self.prepared += 1
        self._ready.put_nowait(sandbox)

    async def take(self) -> S | None:
        """A sandbox started ahead, or one already starting; None: start one now."""
        if asyncio.get_running_loop() is not self._loop:
            return None  # its pipes are on another event loop
        self.left -= 1
        try:
            while True:
                if self._ready.empty() and len(self._starting) <= self._waiting:
                    return None
                self._waiting += 1
                try:
                    sandbox = await self._ready.get()
                finally:
                    self._waiting -= 1
                if sandbox is None:
                    return None
                if self._alive(sandbox):
                    self.taken += 1
                    return sandbox
                self._let_go(sandbox)  # it died while it waited: never handed out
        finally:
            self.fill()

    async def close(self) -> None:
        """Stop preparing; give back what is ready (the caller waits for its teardown)."""
        self._closed = True
        starting = list(self._starting)
        for task in starting:
            task.cancel()
        await asyncio.gather(*starting, return_exceptions=True)
        while not self._ready.empty():
            sandbox = self._ready.get_nowait()
            if sandbox is not None:
                self._let_go(sandbox)


_current: contextvars.ContextVar[Ahead[Any] | None] = contextvars.ContextVar(
    "judger_sandboxes_ahead", default=None
)


def current(key: Any) -> Ahead[Any] | None:
    """The preparation in force for sandboxes of ``key`` (their limits), if any."""
    ahead = _current.get()
    return ahead if ahead is not None and ahead.key == key else None


def enter(ahead: Ahead[Any]) -> contextvars.Token[Ahead[Any] | None]:
    ahead.fill()
    return _current.set(ahead)


def leave(token: contextvars.Token[Ahead[Any] | None]) -> None:
    _current.reset(token)
