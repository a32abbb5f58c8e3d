"""The process-wide shared :class:`~judger.runtime.procpool.pool.ProcessPool`, and its fork hygiene."""

from __future__ import annotations

import importlib.util
import os
import threading
from multiprocessing import util as mp_util
from typing import Any

from judger.runtime.procpool.forkserver import forget_parents_fork_server
from judger.runtime.procpool.pool import ProcessPool

__all__ = [
    "close_shared_pool",
    "configure_shared_pool",
    "default_preload",
    "shared_pool",
    "shared_pool_options",
]


_shared: ProcessPool | None = None
_shared_options: dict[str, Any] = {}
_shared_lock = threading.Lock()


_PRELOAD = ("judger.runtime.procpool.worker", "math_verify", "judger.scorers.math.warmup")
"""Imported once in the fork server instead of once per worker: Math-Verify's import, then the first
use of its parser (the scorers' warm-up module), are the slowest part of a worker's start."""


def default_preload() -> list[str]:
    """The modules the shared pool's workers import before their first call (those installed)."""
    return [m for m in _PRELOAD if importlib.util.find_spec(m)]


def shared_pool() -> ProcessPool:
    """The process-wide pool (``os.cpu_count()`` workers), started on first use.

    A child created by ``fork`` gets its own pool on first use: the parent's workers are not its own.
    Options come from :func:`configure_shared_pool`.
    """
    global _shared
    pool = _shared
    if pool is not None and not pool.closed and pool.owner_pid == os.getpid():
        return pool
    with _shared_lock:
        pool = _shared
        if pool is None or pool.closed or pool.owner_pid != os.getpid():
            options = {"preload": default_preload(), "name": "shared_pool", **_shared_options}
            pool = _shared = ProcessPool(**options)
            # A multiprocessing child ends by joining its own children, then os._exit: atexit never
            # runs there. Close the pool before that join, or it waits on our workers for ever.
            mp_util.Finalize(None, close_shared_pool, exitpriority=10)
        return pool


def configure_shared_pool(**options: Any) -> None:
    """Set :class:`ProcessPool` options of the shared pool (``workers``, ``timeout``, caps ...).

    A running shared pool is closed; the next :func:`shared_pool` call starts one with the options.
    """
    global _shared
    with _shared_lock:
        _shared_options.clear()
        _shared_options.update(options)
        old, _shared = _shared, None
    if old is not None and old.owner_pid == os.getpid():
        old.close()


def shared_pool_options() -> dict[str, Any]:
    """The options :func:`configure_shared_pool` last set (a copy)."""
    with _shared_lock:
        return dict(_shared_options)


def close_shared_pool() -> None:
    """Stop the shared pool's workers (options kept); the next :func:`shared_pool` starts afresh."""
    global _shared
    with _shared_lock:
        old, _shared = _shared, None
    if old is not None and old.owner_pid == os.getpid():
        old.close()


def _after_fork_in_child() -> None:
    global _shared_lock, _shared
    # the lock may have been held by another thread at fork time; the pool is the parent's
    _shared_lock = threading.Lock()
    _shared = None
    forget_parents_fork_server()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
