"""Calls on the event loop itself: for scorers whose cost is bounded by construction."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

# A batch gives the event loop a turn this often, so a 100k batch never starves other tasks.
YIELD_EVERY = 2048


class InlineExecutor:
    """``fn(item)`` in the caller's event loop, no hand-off and no deadline: only calls
    that cannot overrun one come here (a regex over the last few hundred characters)."""

    travels = False

    async def run(self, fn: Any, items: Sequence[Any], deadline: float) -> list[Any]:
        out: list[Any] = []
        append = out.append
        for i, item in enumerate(items):
            try:
                append(fn(item))
            except Exception as exc:
                append(exc)
            if i % YIELD_EVERY == YIELD_EVERY - 1:
                await asyncio.sleep(0)
        return out

    async def call_batch(self, fn: Any, item: Any, deadline: float, size: int) -> Any:
        return fn(item)

    async def aclose(self) -> None:
        return None
