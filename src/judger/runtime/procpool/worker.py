"""The loop each :class:`~judger.runtime.procpool.pool.ProcessPool` worker process runs.

A worker receives chunks of pickled ``(fn, args, kwargs)`` calls, each under its task id, on its end
of a pipe, runs them in order and sends back ``(task_id, ok, value)`` for each as it finishes. It
never enforces deadlines itself: the parent kills it with SIGKILL when a call overruns, which also
stops code stuck in C (a huge sympy power holds the GIL, so no in-process timer could interrupt it).
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
from multiprocessing.connection import Connection
from typing import Any

from judger.core.errors import JudgerError
from judger.runtime.interrupts import ignore_interrupts

_PR_SET_PDEATHSIG = 1


READY = b"R"
"""The worker's first message: its preload imports are done, calls may come (deadlines start now)."""


class RemoteError(JudgerError):
    """An exception raised in a worker that could not be sent back as itself (not picklable)."""


def die_with_parent(parent: int | None = None) -> None:
    """Ask Linux to SIGKILL this process when its parent exits, so a busy worker never outlives us.

    An idle worker notices a dead parent on its own (EOF on the pipe); a worker deep in a
    computation would not, hence the kernel's help. ``parent``: the parent's pid as it was known
    before this process started; if that parent is already gone, this process exits now (the
    kernel's signal would never come). Elsewhere than on Linux this is a no-op.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def _release_fork_server() -> None:
    """Close our copy of the fork server's "owner alive" pipe.

    multiprocessing hands every forkserver child a write end of the pipe by which the fork server
    notices that its owner died. A worker stuck in a computation would hold it open, so the fork
    server, and with it the parent-death signal above, would outlive a SIGKILLed owner.
    """
    module = sys.modules.get("multiprocessing.forkserver")
    server = getattr(module, "_forkserver", None)
    fd = getattr(server, "_forkserver_alive_fd", None)
    if isinstance(fd, int):
        try:
            os.close(fd)
        except OSError:
            pass
        server._forkserver_alive_fd = None  # type: ignore[union-attr]


def _limit_memory(memory_limit_bytes: int | None) -> None:
    if not memory_limit_bytes:
        return
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory_limit_bytes, memory_limit_bytes))
    except (ImportError, ValueError, OSError):
        pass


def loads(blob: bytes) -> bool:
    """True once ``blob`` unpickles here: whether a call's function and arguments reach a worker
    (the modules they name importable in it), asked before calls are sent."""
    pickle.loads(blob)
    return True


def _encode(task_id: int, ok: bool, value: Any) -> bytes:
    try:
        return pickle.dumps((task_id, ok, value), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        what = "result" if ok else f"exception {type(value).__name__}: {value}"
        error = RemoteError(f"the worker could not send back its {what} ({type(exc).__name__}: {exc})")
        return pickle.dumps((task_id, False, error), protocol=pickle.HIGHEST_PROTOCOL)


def _import(modules: tuple[str, ...]) -> None:
    import importlib

    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # a missing optional module only costs time later
            pass


def worker_main(
    conn: Connection, memory_limit_bytes: int | None = None, preload: tuple[str, ...] = ()
) -> None:
    """Serve calls until the parent sends an empty message or goes away.

    A message is a chunk of calls, each an 8-byte little-endian task id, an 8-byte length and the
    pickled ``(fn, args, kwargs)``, so a call whose arguments cannot be rebuilt here still gets an
    answer under its id.
    """
    die_with_parent()
    _release_fork_server()
    # Ctrl-C in a terminal reaches the whole process group; the parent decides when workers stop.
    ignore_interrupts()
    _limit_memory(memory_limit_bytes)
    # imported before READY, so that no call's deadline pays for them (free when the fork server has them)
    _import(preload)
    try:
        conn.send_bytes(READY)
    except OSError:
        return
    while True:
        try:
            message = conn.recv_bytes()
        except (EOFError, OSError):
            return
        if not message:
            return
        # a chunk of calls, answered one reply per call as each finishes: the parent starts the
        # next call's deadline from the reply to the one before
        view = memoryview(message)
        at = 0
        while at < len(view):
            task_id = int.from_bytes(view[at : at + 8], "little")
            size = int.from_bytes(view[at + 8 : at + 16], "little")
            payload = view[at + 16 : at + 16 + size]
            at += 16 + size
            try:
                fn, args, kwargs = pickle.loads(payload)
            except BaseException as exc:
                reply = _encode(task_id, False, RemoteError(f"the worker cannot unpickle the call: {exc!r}"))
            else:
                try:
                    reply = _encode(task_id, True, fn(*args, **kwargs))
                except BaseException as exc:
                    reply = _encode(task_id, False, exc)
            try:
                conn.send_bytes(reply)
            except OSError:
                return
