"""Hang-proof execution of CPU-bound calls: worker processes that are killed when they overrun.

:class:`ProcessPool` runs top-level functions in worker processes it owns. Every call has a
deadline in float seconds, measured from the moment a worker receives it; a worker that overruns is
killed with SIGKILL (which also stops code stuck in C with the GIL held, such as a huge sympy power)
and replaced, and the call reports a :class:`~judger.core.errors.JudgeTimeoutError`. Calls whose pickled
arguments exceed ``max_input_bytes`` are refused with :class:`InputTooLargeError` before reaching a
worker. Identical calls inside one :meth:`ProcessPool.map` run once.

One dispatcher thread owns all worker I/O and hands results over through thread-safe futures, so
the pool behaves the same from the main thread, other threads, any asyncio loop and Ray actors
(threaded or async): nothing here uses signals in the calling process. Workers start through
multiprocessing's ``forkserver`` (``spawn`` where it is missing), never by forking the caller,
which may hold threads and locks. They are stopped by :meth:`ProcessPool.close`, by a weakref
finalizer when the pool is garbage collected, at interpreter exit, and by the kernel (parent-death
signal) if the owner dies without running any of those.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from judger.runtime.procpool.dispatcher import _Batch, _PoolCore, _Task
from judger.runtime.procpool.errors import (
    InputTooLargeError,
    PoolClosedError,
    RemoteError,
    WorkerCrashedError,
)
from judger.runtime.procpool.forkserver import default_start_method

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_MAX_INPUT_BYTES",
    "InputTooLargeError",
    "PoolClosedError",
    "ProcessPool",
    "RemoteError",
    "WorkerCrashedError",
]

DEFAULT_CALL_TIMEOUT = 30.0
DEFAULT_MAX_INPUT_BYTES = 8 * 1024 * 1024

Call = tuple[Sequence[Any], dict[str, Any]]
"""One call of ``map``: ``(args, kwargs)``."""


def _fn_name(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", None) or "?"
    return f"{module}.{getattr(fn, '__qualname__', repr(fn))}"


class ProcessPool:
    """Worker processes with a deadline per call; a worker that overruns is killed and replaced.

    - ``workers``: number of worker processes (default ``os.cpu_count()``), started on first use.
    - ``timeout``: default deadline of one call, in seconds (float); each call may override it.
    - ``max_input_bytes``: cap on a call's pickled ``(fn, args, kwargs)``; bigger calls fail with
      :class:`InputTooLargeError` naming the size and the cap.
    - ``start_method``: ``"forkserver"`` (default where available) or ``"spawn"``; never plain fork.
    - ``preload``: modules a worker imports before it takes calls, so that no deadline pays for them
      (the fork server imports them once for all workers when this pool starts it).
    - ``memory_limit_bytes``: address-space limit of each worker (``RLIMIT_AS``), off by default.
    - ``max_tasks_per_worker``: recycle a worker after that many calls, off by default.

    Functions must be importable top-level functions (they are pickled by reference). Results come
    back in call order; a call that raised gives its exception instance, one that overran gives a
    :class:`~judger.core.errors.JudgeTimeoutError`, one whose worker died a :class:`WorkerCrashedError`.
    """

    def __init__(
        self,
        workers: int | None = None,
        *,
        timeout: float = DEFAULT_CALL_TIMEOUT,
        max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES,
        start_method: str | None = None,
        preload: Sequence[str] = (),
        memory_limit_bytes: int | None = None,
        max_tasks_per_worker: int | None = None,
        name: str = "process_pool",
    ) -> None:
        workers = workers if workers is not None else (os.cpu_count() or 1)
        if not (isinstance(workers, int) and workers >= 1):
            raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
        _check_timeout(timeout)
        if not (isinstance(max_input_bytes, int) and max_input_bytes >= 1):
            raise ValueError(f"max_input_bytes must be an integer >= 1, got {max_input_bytes!r}")
        start_method = start_method or default_start_method()
        if start_method not in ("forkserver", "spawn"):
            raise ValueError(
                f"start_method must be 'forkserver' or 'spawn', got {start_method!r} "
                "(plain fork is unsafe in threaded programs and Ray actors)"
            )
        if max_tasks_per_worker is not None and max_tasks_per_worker < 1:
            raise ValueError(f"max_tasks_per_worker must be >= 1 or None, got {max_tasks_per_worker!r}")
        self.timeout = float(timeout)
        self.max_input_bytes = max_input_bytes
        self.start_method = start_method
        self._core = _PoolCore(name, workers, start_method, preload, memory_limit_bytes, max_tasks_per_worker)
        self._finalizer = weakref.finalize(self, self._core.close)

    # --- introspection ---------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._core.name

    @property
    def workers(self) -> int:
        return self._core.size

    @property
    def closed(self) -> bool:
        return self._core.closed

    @property
    def started(self) -> bool:
        """Workers asked for, by :meth:`start` or a call (they may still be starting up)."""
        return self._core.thread is not None

    @property
    def owner_pid(self) -> int:
        return self._core.owner_pid

    def worker_pids(self) -> list[int]:
        """Process ids of the live workers (started on first use, so empty before any call)."""
        return self._core.alive_pids()

    def stats(self) -> dict[str, Any]:
        """Counters: calls completed, timeouts (workers killed), crashes, workers started, startup times."""
        startup = self._core.startup_seconds
        return {
            **self._core.counters,
            "workers": self.workers,
            "start_method": self.start_method,
            "max_worker_start_s": max(startup) if startup else None,
        }

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"ProcessPool(name={self.name!r}, workers={self.workers}, timeout={self.timeout:g}, {state})"

    # --- submitting ------------------------------------------------------------------------------

    def _submit(
        self, fn: Callable[..., Any], calls: Sequence[Call], timeout: float | None, cap: int | None = None
    ) -> _Batch:
        timeout = self.timeout if timeout is None else _check_timeout(timeout)
        cap = self.max_input_bytes if cap is None else cap
        batch = _Batch(len(calls))
        name = _fn_name(fn)
        tasks: dict[bytes, _Task] = {}
        for index, (args, kwargs) in enumerate(calls):
            try:
                payload = pickle.dumps((fn, tuple(args), dict(kwargs)), protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:
                batch.set(index, exc)
                continue
            if len(payload) > cap:
                batch.set(
                    index,
                    InputTooLargeError(
                        f"input too large: the call to {name} pickles to {len(payload):,} bytes, over the "
                        f"process pool's cap of {cap:,} bytes (max_input_bytes)"
                    ),
                )
                continue
            task = tasks.get(payload)
            if task is None:
                task = tasks[payload] = _Task(next(self._core.ids), payload, timeout, name)
            task.targets.append((batch, index))
        if tasks:
            self._core.submit(tasks.values())
        return batch

    async def map(
        self,
        fn: Callable[..., Any],
        calls: Sequence[Call],
        *,
        timeout: float | None = None,
        max_input_bytes: int | None = None,
    ) -> list[Any]:
        """Run ``fn(*args, **kwargs)`` for each ``(args, kwargs)``; each entry is a value or an exception.

        Identical calls run once. If the awaiting task is cancelled, calls not yet started are dropped.
        ``max_input_bytes``: this map's cap on one call's pickled size (default: the pool's).
        """
        batch = self._submit(fn, calls, timeout, max_input_bytes)
        try:
            return await asyncio.wrap_future(batch.future)
        except asyncio.CancelledError:
            batch.cancelled = True
            raise

    def preload_in_workers(self, modules: Sequence[str]) -> None:
        """Have each worker started from now on import ``modules`` before it takes calls, so that no
        call's deadline pays for them (a worker already running imports them on the first call that
        needs them). Unlike ``preload``, its fork server never imports them: a caller's module may
        start what a forked child cannot inherit (a CUDA context)."""
        if not set(modules) <= set(self._core.preload + self._core.worker_preload):
            self._core.add_worker_preload(modules)

    def start(self) -> None:
        """Start the worker processes now (they start on the first call otherwise): a caller that
        has other work first, such as reading its input, overlaps the workers' start-up with it."""
        self._core.start()

    def map_sync(
        self, fn: Callable[..., Any], calls: Sequence[Call], *, timeout: float | None = None
    ) -> list[Any]:
        """Blocking :meth:`map`, callable from any thread."""
        return self._submit(fn, calls, timeout).future.result()

    async def run(
        self, fn: Callable[..., Any], *args: Any, timeout: float | None = None, **kwargs: Any
    ) -> Any:
        """``fn(*args, **kwargs)`` in a worker; raises what it raised, or JudgeTimeoutError."""
        (result,) = await self.map(fn, [(args, kwargs)], timeout=timeout)
        if isinstance(result, BaseException):
            raise result
        return result

    def run_sync(
        self, fn: Callable[..., Any], *args: Any, timeout: float | None = None, **kwargs: Any
    ) -> Any:
        """Blocking :meth:`run`: works in any thread, with or without an event loop."""
        (result,) = self.map_sync(fn, [(args, kwargs)], timeout=timeout)
        if isinstance(result, BaseException):
            raise result
        return result

    # --- closing ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop every worker (SIGKILL: they hold no state) and fail calls still waiting. Idempotent."""
        self._finalizer()

    async def aclose(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.close)

    def __enter__(self) -> ProcessPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> ProcessPool:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _check_timeout(timeout: Any) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    return float(timeout)
