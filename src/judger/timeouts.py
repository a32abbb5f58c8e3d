"""A deadline context manager for coroutines, without creating a task per call."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

if sys.version_info >= (3, 11):
    deadline = asyncio.timeout
else:  # pragma: no cover - exercised only on Python 3.10

    @asynccontextmanager
    async def deadline(delay: float | None) -> AsyncIterator[None]:
        """Cancel the enclosed block after ``delay`` seconds and raise TimeoutError (3.10 fallback)."""
        if delay is None:
            yield
            return
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        fired = False

        def fire() -> None:
            nonlocal fired
            fired = True
            task.cancel()

        handle = loop.call_later(delay, fire)
        try:
            yield
        except asyncio.CancelledError as exc:
            if fired:
                raise TimeoutError from exc
            raise
        finally:
            handle.cancel()
