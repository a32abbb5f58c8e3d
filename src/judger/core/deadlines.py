"""Deadlines for coroutines, without creating a task per call.

``deadline(seconds)`` is ``asyncio.timeout`` (with a fallback for Python 3.10). ``judge_deadline``
is the one judgers use: it turns the deadline firing, and only that, into a ``JudgeTimeoutError``
naming the judger; a ``TimeoutError`` raised by the judged code itself (a URL handler's request
timeout, a worker's own deadline) keeps its own message. ``wait_for`` replaces ``asyncio.wait_for``,
which before Python 3.12 can drop a cancellation (ruff refuses the latter in judger's code).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, TypeVar

from judger.core.errors import JudgeTimeoutError

T = TypeVar("T")

if sys.version_info >= (3, 11):
    deadline = asyncio.timeout
else:  # pragma: no cover - exercised only on Python 3.10

    class _Fired:
        def __init__(self) -> None:
            self.fired = False

        def expired(self) -> bool:
            return self.fired

    @asynccontextmanager
    async def deadline(delay: float | None) -> AsyncIterator[_Fired]:
        """Cancel the enclosed block after ``delay`` seconds and raise TimeoutError (3.10 fallback)."""
        state = _Fired()
        if delay is None:
            yield state
            return
        task = asyncio.current_task()
        assert task is not None

        def fire() -> None:
            state.fired = True
            task.cancel()

        handle = asyncio.get_running_loop().call_later(delay, fire)
        try:
            yield state
        except asyncio.CancelledError as exc:
            if state.fired:
                raise TimeoutError from exc
            raise
        finally:
            handle.cancel()


async def wait_for(awaitable: Awaitable[T], timeout: float | None) -> T:
    """``await awaitable``, raising TimeoutError after ``timeout`` seconds (None: no limit).

    Not ``asyncio.wait_for``: before Python 3.12 it returns the awaited result when the caller is
    cancelled in the same turn of the loop as that result arrives (CPython gh-86296), so the cancel
    is lost and a sandbox told to stop runs on to its program's own end. Here the awaitable runs in
    the caller's task, and a cancel always raises: CancelledError, or on Python 3.10 TimeoutError
    when it lands in the turn the deadline fires (3.10's tasks do not count their cancels).
    """
    async with deadline(timeout):
        return await awaitable


class judge_deadline:
    """``async with judge_deadline(name, seconds):`` -- JudgeTimeoutError when the deadline fires."""

    __slots__ = ("_cm", "_timer", "detail", "judger_name", "seconds")

    def __init__(self, judger_name: str, seconds: float, detail: str = "") -> None:
        self.judger_name = judger_name
        self.seconds = seconds
        self.detail = detail
        self._cm: Any = None
        self._timer: Any = None

    async def __aenter__(self) -> judge_deadline:
        self._cm = deadline(self.seconds)
        self._timer = await self._cm.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        try:
            suppress = await self._cm.__aexit__(exc_type, exc, tb)
        except TimeoutError as fired:
            # raised by the deadline's own exit: the deadline fired (the body's own TimeoutError
            # would have passed through untouched)
            raise JudgeTimeoutError(self.judger_name, self.seconds, self.detail) from fired
        if isinstance(exc, Exception) and self._fired():
            raise JudgeTimeoutError(self.judger_name, self.seconds, self.detail) from exc
        return suppress

    def _fired(self) -> bool:
        """Whether the deadline fired. An exception from the body after it did is this deadline
        too: the body's code turned its cancel into another one (anyio's task group on Python
        3.10 raises ``ValueError: second argument (exceptions) must be a non-empty sequence`` for a
        cancel that lands while httpx connects)."""
        return self._timer is not None and bool(self._timer.expired())
