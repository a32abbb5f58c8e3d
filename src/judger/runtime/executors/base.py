"""The one interface every executor has, and the declaration a judger makes of what it needs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

Call = tuple[tuple[Any, ...], dict[str, Any]]
"""``(args, kwargs)`` of one call of a function, as :func:`spread` applies it."""

Kind = Literal["sync", "async", "url"]


def spread(fn: Callable[..., Any], call: Call) -> Any:
    """``fn(*args, **kwargs)``: ``partial(spread, fn)`` is ``fn`` taking one :data:`Call` as its item,
    and pickles by reference wherever ``fn`` does (what a worker process is handed)."""
    args, kwargs = call
    return fn(*args, **kwargs)


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

    ``run``: ``fn(item)`` for each item (awaited for the places that run async functions), each under
    ``deadline`` seconds (for the places that can overrun one: from when the call starts, not while
    it queues), the results in order with the exception in place of a call that failed; one call's
    failure never fails the others. ``call_batch``: ``fn(item)`` once, standing for ``size`` samples
    (a batch handler's call), under one deadline; it raises its failure. ``aclose``: gives back what
    the executor holds (threads, clients). ``travels``: ``fn`` and the items are pickled to another
    process, so ``fn`` must pickle by reference (a top-level function of an importable module, or a
    ``partial`` of one such as ``partial(spread, fn)``), never a closure.
    """

    travels: bool

    async def run(self, fn: Any, items: Sequence[Any], deadline: float) -> list[Any]: ...

    async def call_batch(self, fn: Any, item: Any, deadline: float, size: int) -> Any: ...

    async def aclose(self) -> None: ...
