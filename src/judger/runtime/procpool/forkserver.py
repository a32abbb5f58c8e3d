"""Starting workers through multiprocessing's fork server without its costs and traps.

- :func:`worker_process_class`: forkserver processes that do not re-import the caller's
  ``__main__`` (scripts, notebooks and Ray's worker entry point would run again in every worker).
- :func:`forget_parents_fork_server`: after ``os.fork`` a child must start a fork server of its own.
- :func:`start_fork_server` / :func:`adopt_fork_server`: a second fork server, started by one
  process and used by its children (forked, or started by a fork server) for their own workers,
  so that what it preloads is imported once for all of them instead of once in each child's server.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any

from judger.runtime.interrupts import interrupts_held


class _NoMainPopen:
    """Builds the forkserver Popen class that skips re-importing the caller's ``__main__`` in workers.

    multiprocessing normally re-runs the parent's main script in every child (the reason for the
    ``if __name__ == "__main__"`` idiom). Our workers only run importable functions, so doing that
    would only cost time and break unguarded scripts, notebooks and Ray's worker entry point.
    """

    cls: Any = None

    @classmethod
    def get(cls) -> Any:
        if cls.cls is None:
            import io
            from multiprocessing import forkserver, popen_forkserver, spawn, util

            # multiprocessing's internals: untyped in typeshed, stable across 3.10 - 3.13
            from multiprocessing.context import reduction, set_spawning_popen  # type: ignore[attr-defined]

            class Popen(popen_forkserver.Popen):
                def _launch(self, process_obj: Any) -> None:
                    prep_data = spawn.get_preparation_data(process_obj._name)
                    prep_data.pop("init_main_from_path", None)
                    prep_data.pop("init_main_from_name", None)
                    buf = io.BytesIO()
                    set_spawning_popen(self)
                    try:
                        reduction.dump(prep_data, buf)
                        reduction.dump(process_obj, buf)
                    finally:
                        set_spawning_popen(None)
                    self.sentinel, w = forkserver.connect_to_new_process(self._fds)  # type: ignore[attr-defined]
                    parent_w = os.dup(w)  # the child's sentinel of its parent, as multiprocessing does
                    self.finalizer = util.Finalize(self, util.close_fds, (parent_w, self.sentinel))  # type: ignore[attr-defined]
                    with open(w, "wb", closefd=True) as f:
                        f.write(buf.getbuffer())
                    self.pid = forkserver.read_signed(self.sentinel)

            cls.cls = Popen
        return cls.cls


def _popen_for_workers(process_obj: Any) -> Any:
    try:
        popen = _NoMainPopen.get()
    except (ImportError, AttributeError):  # another Python's internals: keep multiprocessing's behaviour
        from multiprocessing.popen_forkserver import Popen as popen
    return popen(process_obj)


try:
    from multiprocessing.context import ForkServerProcess

    class _WorkerProcess(ForkServerProcess):
        """A forkserver process that does not re-import ``__main__`` (pickled by reference: top level)."""

        _Popen = staticmethod(_popen_for_workers)

except ImportError:  # pragma: no cover - platforms without forkserver
    _WorkerProcess = None  # type: ignore[assignment,misc]


def worker_process_class(ctx: Any) -> Any:
    if ctx.get_start_method() == "forkserver" and _WorkerProcess is not None:
        return _WorkerProcess
    return ctx.Process


def worker_context(start_method: str) -> Any:
    """A multiprocessing context whose processes are :func:`worker_process_class`'s (for APIs that
    take a context, such as ``ProcessPoolExecutor(mp_context=...)``)."""
    ctx = mp.get_context(start_method)
    if ctx.get_start_method() != "forkserver" or _WorkerProcess is None:
        return ctx
    from multiprocessing.context import ForkServerContext

    class _Context(ForkServerContext):
        Process = _WorkerProcess

    return _Context()


def default_start_method() -> str:
    return "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"


def forget_parents_fork_server() -> None:
    """Make multiprocessing start a fork server of our own in a forked child.

    A forked child inherits the parent's fork server handle, which it cannot use (the server is
    not its child: starting a process fails with ChildProcessError), and a copy of the pipe that
    tells that server its owner is alive. Dropping both lets the next worker start a fresh server.
    """
    module = sys.modules.get("multiprocessing.forkserver")
    server = getattr(module, "_forkserver", None)
    if server is None or getattr(server, "_forkserver_pid", None) is None:
        return
    fd = getattr(server, "_forkserver_alive_fd", None)
    if isinstance(fd, int):
        with contextlib.suppress(OSError):
            os.close(fd)
    for name in ("_forkserver_address", "_forkserver_alive_fd", "_forkserver_pid", "_inherited_fds"):
        if hasattr(server, name):
            setattr(server, name, None)


ForkServerHandle = dict[str, Any]
"""What a child needs to reach a fork server its ancestor started: the server's socket address
(and, on Pythons that have one, its authentication key)."""


def server_preload(preload: Sequence[str], *, shared: bool) -> list[str]:
    """A fork server's preload: ``preload`` after :mod:`~judger.runtime.preload_begin`, so
    that Ctrl-C does not kill the server while it imports ``preload`` (it ignores SIGINT itself only
    after). ``shared``: multiprocessing's process-wide server, whose children may be another
    program's: :mod:`~judger.runtime.preload_end` hands SIGINT back to Python's handler for
    them (judger's workers and shards ignore it themselves). A server of judger's own hands the
    ignored signal to its children, so that none sees Ctrl-C even while it starts."""
    begin = ["judger.runtime.preload_begin", *preload]
    return [*begin, "judger.runtime.preload_end"] if shared else begin


def start_fork_server(preload: Sequence[str]) -> Any:
    """A fork server of its own (not multiprocessing's process-wide one), started now: it imports
    ``preload`` while the caller goes on. Stop it with :func:`stop_fork_server`; it also exits once
    no process holds its alive pipe (this one, the children it forks, children forked from here)."""
    from multiprocessing import forkserver

    server = forkserver.ForkServer()
    server.set_forkserver_preload(server_preload(preload, shared=False))
    started_deaf(server.ensure_running)  # the server and what it forks never see Ctrl-C
    return server


def started_deaf(start: Callable[[], None]) -> None:
    """``start()``, the start of a process or a fork server, inside
    :func:`~judger.runtime.interrupts.interrupts_held`: what it starts is born deaf to Ctrl-C.
    multiprocessing's resource tracker is started first: starting it unblocks SIGINT, and what
    started after it would be born hearing it."""
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    with interrupts_held():
        start()


def fork_server_handle(server: Any, *, forked: bool) -> ForkServerHandle:
    """What :func:`adopt_fork_server` needs in a child. ``forked``: for a child this process forks,
    which inherits the server's alive pipe (a child started by a fork server has its own)."""
    names = _HANDLE + (("_forkserver_alive_fd",) if forked else ())
    return {name: getattr(server, name) for name in names if hasattr(server, name)}


def stop_fork_server(server: Any) -> None:
    """Stop a server of :func:`start_fork_server` and wait for it. It holds no state, so it is
    killed: told to stop, it would tear down an interpreter full of what it preloaded (a third of a
    second for Math-Verify and sympy) while its owner waits."""
    pid = getattr(server, "_forkserver_pid", None)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(OSError, ChildProcessError):
        server._stop()


_HANDLE = ("_forkserver_address", "_forkserver_authkey")


def adopt_fork_server(handle: ForkServerHandle) -> bool:
    """Start this process's forkserver workers from the server of ``handle`` (which an ancestor
    started, see :func:`start_fork_server`, and keeps running while this process lives) instead of
    a server of this process's own; False (nothing changed) where that cannot be done.

    Every new worker is handed the pipe that tells a server its clients are alive: the handle's
    (a child forked from the server's owner) or this process's (a child of a fork server).
    multiprocessing would check that the server is its child (``waitpid``) and start another: here
    nothing is checked, the server is the ancestor's.
    """
    from multiprocessing import forkserver, resource_tracker

    server = getattr(forkserver, "_forkserver", None)
    if (
        server is None
        or not handle.get("_forkserver_address")
        or handle.get("_forkserver_alive_fd", getattr(server, "_forkserver_alive_fd", None)) is None
        or getattr(server, "_forkserver_pid", None) is not None  # a server of this process's own
        or not all(hasattr(server, name) for name in handle)
    ):
        return False
    for name, value in handle.items():
        setattr(server, name, value)

    def ensure_running() -> None:
        resource_tracker.ensure_running()

    server.ensure_running = ensure_running
    return True
