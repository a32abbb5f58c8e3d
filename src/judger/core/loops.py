"""Event-loop plumbing written once: state kept per running loop, and running a coroutine from sync code.

asyncio primitives (conditions, semaphores, futures) belong to the loop that made them, while sync
callers may drive one judger from several ``asyncio.run()`` loops in turn; :class:`LoopLocal` gives
each running loop its own instance and drops those of closed loops.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class LoopLocal(Generic[T]):
    """``get()`` returns this running loop's instance of ``factory()``, made on first use."""

    __slots__ = ("_factory", "_last", "_values")

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._values: dict[asyncio.AbstractEventLoop, T] = {}
        self._last: tuple[asyncio.AbstractEventLoop, T] | None = None

    def get(self) -> T:
        loop = asyncio.get_running_loop()
        last = self._last
        if last is not None and last[0] is loop:
            return last[1]
        value = self._values.get(loop)
        if value is None:
            # a sync caller runs a fresh loop each time: forget the closed ones
            self._values = {lp: v for lp, v in self._values.items() if not lp.is_closed()}
            value = self._values[loop] = self._factory()
        self._last = (loop, value)
        return value

    def current(self) -> T | None:
        """This running loop's instance if it has one (None outside a loop or before first use)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        return self._values.get(loop)

    def clear(self) -> None:
        self._values = {}
        self._last = None


def run_sync(coro_fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run ``coro_fn()`` to completion from sync code: in ``asyncio.run`` when no loop runs in this
    thread, else on a helper thread with its own loop (never blocking on the caller's loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro_fn())
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro_fn())
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="judger-run-sync", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
