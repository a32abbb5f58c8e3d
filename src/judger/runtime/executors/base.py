"""The one interface every executor has, and the declaration a judger makes of what it needs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

Call = tuple[tuple[Any, ...], dict[str, Any]]
"""``(args, kwargs)`` of one call: what every executor is handed, whatever its place."""

NO_KWARGS: dict[str, Any] = {}
"""The keyword arguments of a call that has none (shared: executors never write into it)."""

Kind = Literal["sync", "async", "url"]


@dataclass(frozen=True, slots=True)
class Needs:
    """What a judger's calls need from the place they run; :func:`pick_executor` reads nothing else.

    ``kind``: a sync function, an async function, or a URL to POST to. For a sync function:
    ``may_hang`` -- it may never return, so it runs where it can be killed at its deadline (a worker
    process); False declares it safe (it always returns). ``on_loop`` -- its cost is bounded by
    construction (a regex over a few hundred characters): it runs on the event loop, no hand-off.
    ``isolation`` -- it runs an untrusted program: each call in a sandbox of its own.
    """

    kind: Kind = "sync"
    may_hang: bool = True
    on_loop: bool = False
    isolation: bool = False


class Executor(Protocol):
    """Runs calls somewhere; one implementation per place, each in its own module.

    ``run``: ``fn(*args, **kwargs)`` for each call, each under ``deadline`` seconds (for the places
    that can overrun one: from when the call starts, not while it queues), the results in order with
    the exception in place of a call that failed; one call's failure never fails the others.
    ``call_batch``: one call standing for ``size`` samples (a batch handler's), under one deadline;
    it raises its failure. ``aclose``: gives back what the executor holds (threads, clients).
    ``travels``: the calls are pickled to another process, so ``fn`` must pickle by reference
    (a top-level function of an importable module), never a closure.
    """

    travels: bool

    async def run(self, fn: Any, calls: Sequence[Call], deadline: float) -> list[Any]: ...

    async def call_batch(self, fn: Any, call: Call, deadline: float, size: int) -> Any: ...

    async def aclose(self) -> None: ...
