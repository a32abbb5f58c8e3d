"""Starting workers through multiprocessing's fork server without its costs and traps.

- :func:`worker_process_class`: forkserver processes that do not re-import the caller's
  ``__main__`` (scripts, notebooks and Ray's worker entry point would run again in every worker).
- :func:`forget_parents_fork_server`: after ``os.fork`` a child must start a fork server of its own.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import sys
from typing import Any


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
