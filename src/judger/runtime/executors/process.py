"""Sync calls in killable worker processes: a call that overruns its deadline has its worker killed."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from judger.runtime.executors.base import Call, spread

if TYPE_CHECKING:
    from judger.runtime.procpool.pool import ProcessPool


def process_pool(pool: ProcessPool | None = None) -> ProcessPool:
    """``pool``, or the process-wide shared pool as it is now.

    Asked for each time, never kept: configure_shared_pool() and close_shared_pool() replace the
    shared pool, and an executor holding the closed one would fail every later call."""
    if pool is not None:
        return pool
    # imported here: what runs no process never starts the pool's multiprocessing machinery
    from judger.runtime.procpool.shared import shared_pool

    return shared_pool()


def _as_calls(fn: Any, items: Sequence[Any]) -> tuple[Any, Sequence[Call]]:
    """The pool's own form of ``fn(item)`` for each item: ``(target, [(args, kwargs), ...])``. A
    ``partial(spread, target)`` already takes calls: they go to the pool as they are, nothing added."""
    if isinstance(fn, partial) and fn.func is spread and len(fn.args) == 1 and not fn.keywords:
        return fn.args[0], items
    return fn, [((item,), {}) for item in items]


class ProcessExecutor:
    """``fn(item)`` on a :class:`~judger.runtime.procpool.pool.ProcessPool` (``pool``, or
    the shared one), ``fn`` and the calls pickled to its workers; the deadline runs from when a worker
    takes the call, and a worker past it is killed and replaced, so even a call stuck in C code cannot
    outlive it. ``modules``: imported by the workers before they take calls (a call's deadline never
    pays for importing them)."""

    travels = True

    def __init__(self, pool: ProcessPool | None = None, modules: Sequence[str] = ()) -> None:
        self._pool = pool
        self.modules = tuple(modules)

    @property
    def pool(self) -> ProcessPool:
        pool = process_pool(self._pool)
        if self.modules:
            pool.preload_in_workers(self.modules)
        return pool

    async def loads(self, *objects: Any, deadline: float = 60.0) -> BaseException | None:
        """Whether a worker unpickles ``objects`` (a function and what travels with its calls): None
        when it does, else why not. Asked before the first call: checks in this process cannot see,
        say, a ``tests`` package that is another one in a fresh interpreter."""
        import pickle

        from judger.runtime.procpool.worker import loads

        blob = pickle.dumps(objects, protocol=pickle.HIGHEST_PROTOCOL)
        (loaded,) = await self.pool.map(loads, [((blob,), {})], timeout=deadline)
        return None if loaded is True else loaded

    async def run(self, fn: Any, items: Sequence[Any], deadline: float) -> list[Any]:
        target, calls = _as_calls(fn, items)
        return await self.pool.map(target, calls, timeout=deadline)

    async def call_batch(self, fn: Any, item: Any, deadline: float, size: int) -> Any:
        pool = self.pool
        target, calls = _as_calls(fn, [item])
        # a batch may pickle to what its samples would, each under the cap of one call
        cap = pool.max_input_bytes * max(1, size)
        (result,) = await pool.map(target, calls, timeout=deadline, max_input_bytes=cap)
        if isinstance(result, BaseException):
            raise result
        return result

    async def aclose(self) -> None:
        return None  # the pool is shared (or its owner's): it outlives the judgers that use it
