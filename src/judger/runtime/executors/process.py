"""Sync calls in killable worker processes: a call that overruns its deadline has its worker killed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from judger.runtime.executors.base import Call

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


class ProcessExecutor:
    """``fn(*args, **kwargs)`` on a :class:`~judger.runtime.procpool.pool.ProcessPool` (``pool``, or
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

    async def run(self, fn: Any, calls: Sequence[Call], deadline: float) -> list[Any]:
        return await self.pool.map(fn, calls, timeout=deadline)

    async def call_batch(self, fn: Any, call: Call, deadline: float, size: int) -> Any:
        pool = self.pool
        # a batch may pickle to what its samples would, each under the cap of one call
        cap = pool.max_input_bytes * max(1, size)
        (result,) = await pool.map(fn, [call], timeout=deadline, max_input_bytes=cap)
        if isinstance(result, BaseException):
            raise result
        return result

    async def aclose(self) -> None:
        return None  # the pool is shared (or its owner's): it outlives the judgers that use it
