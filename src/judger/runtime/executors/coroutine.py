"""Async functions awaited on the event loop, each under its own deadline, a bounded number at once."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from judger.core.deadlines import judge_deadline
from judger.core.judger import gather_bounded


class CoroutineExecutor:
    """``await fn(item)`` for each item, at most ``limit`` at once, each under the
    deadline (a :class:`~judger.core.errors.JudgeTimeoutError` naming ``name`` when it fires).
    ``raise_errors``: a failure is raised (and the other calls cancelled) instead of returned in
    its place -- a judger's ``on_error="raise"``."""

    travels = False

    def __init__(self, name: str, limit: int, *, raise_errors: bool = False) -> None:
        self.name = name
        self.limit = limit
        self.raise_errors = raise_errors

    async def _one(self, fn: Any, item: Any, deadline: float) -> Any:
        try:
            async with judge_deadline(self.name, deadline):
                return await fn(item)
        except Exception as exc:
            if self.raise_errors:
                raise
            return exc

    async def run(self, fn: Any, items: Sequence[Any], deadline: float) -> list[Any]:
        return await gather_bounded([partial(self._one, fn, item, deadline) for item in items], self.limit)

    async def call_batch(self, fn: Any, item: Any, deadline: float, size: int) -> Any:
        async with judge_deadline(self.name, deadline, f"batch of {size}"):
            return await fn(item)

    async def aclose(self) -> None:
        return None
