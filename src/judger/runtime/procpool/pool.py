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
import contextlib
import importlib.util
import itertools
import multiprocessing as mp
import os
import pickle
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from multiprocessing.connection import Connection, wait
from typing import Any

from judger.core.errors import JudgerError, JudgeTimeoutError
from judger.runtime.procpool.worker import READY, RemoteError, worker_main

__all__ = [
    "DEFAULT_MAX_INPUT_BYTES",
    "DEFAULT_TIMEOUT",
    "InputTooLargeError",
    "PoolClosedError",
    "ProcessPool",
    "RemoteError",
    "WorkerCrashedError",
    "close_shared_pool",
    "configure_shared_pool",
    "shared_pool",
    "shared_pool_options",
]

DEFAULT_TIMEOUT = 30.0
STARTUP_TIMEOUT = 120.0
"""A worker that has not finished importing its preload modules by then is killed."""
MAX_START_FAILURES = 3
"""Workers dying this many times in a row before becoming ready fail the waiting calls."""
DEFAULT_MAX_INPUT_BYTES = 8 * 1024 * 1024

Call = tuple[Sequence[Any], dict[str, Any]]
"""One call of ``map``: ``(args, kwargs)``."""


class InputTooLargeError(JudgerError, ValueError):
    """A call's pickled arguments exceed the pool's ``max_input_bytes``; it never reached a worker."""


class WorkerCrashedError(JudgerError, RuntimeError):
    """The worker process died while running the call (segfault, out of memory, ``os._exit``)."""


class PoolClosedError(JudgerError, RuntimeError):
    """The pool was closed before the call finished."""


def _fn_name(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", None) or "?"
    return f"{module}.{getattr(fn, '__qualname__', repr(fn))}"


class _Batch:
    """The results of one map(): filled by the dispatcher, completed once every slot is set."""

    __slots__ = ("cancelled", "future", "remaining", "results")

    def __init__(self, size: int) -> None:
        self.results: list[Any] = [None] * size
        self.remaining = size
        self.future: Future[list[Any]] = Future()
        self.cancelled = False
        if size == 0:
            self.future.set_result(self.results)

    def set(self, index: int, value: Any) -> None:
        self.results[index] = value
        self.remaining -= 1
        if self.remaining == 0 and not self.future.done():
            self.future.set_result(self.results)


class _Task:
    __slots__ = ("fn_name", "id", "payload", "targets", "timeout")

    def __init__(self, task_id: int, payload: bytes, timeout: float, fn_name: str) -> None:
        self.id = task_id
        self.payload = payload
        self.timeout = timeout
        self.fn_name = fn_name
        self.targets: list[tuple[_Batch, int]] = []

    @property
    def cancelled(self) -> bool:
        return all(batch.cancelled for batch, _ in self.targets)


class _Worker:
    __slots__ = ("conn", "deadline", "done", "process", "ready", "started", "task")

    def __init__(self, process: Any, conn: Connection, started: float) -> None:
        self.process = process
        self.conn = conn
        self.task: _Task | None = None
        self.ready = False  # set by the worker's READY message, once its imports are done
        self.started = started
        self.deadline = started + STARTUP_TIMEOUT
        self.done = 0

    @property
    def watched(self) -> bool:
        """Starting up or running a call: the dispatcher waits on it and enforces its deadline."""
        return self.task is not None or not self.ready


class _PoolCore:
    """Everything the dispatcher thread and the finalizer need; holds no reference to the ProcessPool."""

    def __init__(
        self,
        name: str,
        workers: int,
        start_method: str,
        preload: Sequence[str],
        memory_limit_bytes: int | None,
        max_tasks_per_worker: int | None,
    ) -> None:
        self.name = name
        self.preload = tuple(preload)
        self.start_failures = 0
        self.size = workers
        self.ctx = mp.get_context(start_method)
        self.process_class = _worker_process_class(self.ctx)
        if start_method == "forkserver" and preload:
            self.ctx.set_forkserver_preload(list(preload))
        self.memory_limit_bytes = memory_limit_bytes
        self.max_tasks_per_worker = max_tasks_per_worker
        self.owner_pid = os.getpid()
        self.lock = threading.Lock()
        self.queue: deque[_Task] = deque()
        self.workers: list[_Worker] = []
        self.closed = False
        self.thread: threading.Thread | None = None
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        self.ids = itertools.count(1)
        self.counters = {"calls": 0, "timeouts": 0, "crashes": 0, "workers_started": 0}
        self.startup_seconds: list[float] = []
        self.warm = False  # start() asked for the workers before any call

    # --- called from any thread ------------------------------------------------------------------

    def submit(self, tasks: Iterable[_Task]) -> None:
        with self.lock:
            if self.closed:
                raise PoolClosedError(f"process pool {self.name!r} is closed")
            self.queue.extend(tasks)
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name=f"judger-{self.name}", daemon=True)
                self.thread.start()
        self._wake()

    def start(self) -> None:
        """Start the workers now instead of on the first call (e.g. while the caller reads its input)."""
        with self.lock:
            if self.closed:
                raise PoolClosedError(f"process pool {self.name!r} is closed")
            self.warm = True
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name=f"judger-{self.name}", daemon=True)
                self.thread.start()
        self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self.wake_w, b"\0")

    def close(self) -> None:
        if os.getpid() != self.owner_pid:
            # a forked copy (its lock may even be held by a thread that did not survive the fork):
            # the workers belong to the original process
            self.closed = True
            return
        with self.lock:
            if self.closed:
                return
            self.closed = True
            pending = list(self.queue)
            self.queue.clear()
            thread = self.thread
        self._wake()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)
        error = PoolClosedError(f"process pool {self.name!r} was closed before the call finished")
        for worker in self.workers:
            if worker.task is not None:
                pending.append(worker.task)
                worker.task = None
            self._stop(worker)
        self.workers.clear()
        for task in pending:
            self._deliver(task, error)
        for fd in (self.wake_r, self.wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    # --- the dispatcher thread -------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self.closed:
                self._start_workers()
                self._dispatch()
                busy = [w for w in self.workers if w.watched]
                timeout = None
                if busy:
                    timeout = max(0.0, min(w.deadline for w in busy) - time.monotonic())
                waitables: list[Any] = [self.wake_r]
                for w in busy:
                    waitables += (w.conn, w.process.sentinel)
                ready = set(wait(waitables, timeout))
                if self.wake_r in ready:
                    with contextlib.suppress(BlockingIOError, OSError):
                        while os.read(self.wake_r, 4096):
                            pass
                if self.closed:
                    return
                for w in busy:
                    if w.conn in ready or w.process.sentinel in ready:
                        if w.ready:
                            self._collect(w)
                        else:
                            self._collect_ready(w)
                now = time.monotonic()
                for w in busy:
                    if w.task is not None and now >= w.deadline:
                        self._time_out(w)
                    elif not w.ready and w in self.workers and now >= w.deadline:
                        self._start_failed(w, f"not ready after {STARTUP_TIMEOUT:g} s")
        except BaseException as exc:  # a bug here must not leave callers waiting forever
            with self.lock:
                self.closed = True
                pending = list(self.queue)
                self.queue.clear()
            error = RuntimeError(f"process pool {self.name!r} dispatcher failed: {exc!r}")
            for w in self.workers:
                if w.task is not None:
                    pending.append(w.task)
                    w.task = None
            for task in pending:
                self._deliver(task, error)

    def _start_workers(self) -> None:
        # Start lazily, all at once: a batch keeps every worker busy anyway.
        while len(self.workers) < self.size and (self.queue or self.workers or self.warm) and not self.closed:
            parent_conn, child_conn = self.ctx.Pipe(duplex=True)
            process = self.process_class(
                target=worker_main,
                args=(child_conn, self.memory_limit_bytes, self.preload),
                name=f"judger-{self.name}-worker",
                daemon=True,
            )
            process.start()
            child_conn.close()
            self.workers.append(_Worker(process, parent_conn, time.monotonic()))
            self.counters["workers_started"] += 1

    def _collect_ready(self, worker: _Worker) -> None:
        try:
            message = worker.conn.recv_bytes() if worker.conn.poll() else None
        except (EOFError, OSError):
            message = None
        if message != READY:
            worker.process.join(timeout=1)
            self._start_failed(worker, f"exit code {worker.process.exitcode}")
            return
        worker.ready = True
        self.start_failures = 0
        self.startup_seconds.append(time.monotonic() - worker.started)

    def _start_failed(self, worker: _Worker, why: str) -> None:
        self._replace(worker)
        self.start_failures += 1
        if self.start_failures < MAX_START_FAILURES or any(w.ready for w in self.workers):
            return
        # every start fails (a preload module that crashes, no memory): answer the waiting calls
        self.start_failures = 0
        with self.lock:
            pending = list(self.queue)
            self.queue.clear()
        error = WorkerCrashedError(
            f"process pool {self.name!r}: worker processes fail to start "
            f"({MAX_START_FAILURES} in a row, last: {why})"
        )
        for task in pending:
            self._deliver(task, error)

    def _next_task(self) -> _Task | None:
        with self.lock:
            while self.queue:
                task = self.queue.popleft()
                if not task.cancelled:
                    return task
        return None

    def _dispatch(self) -> None:
        for worker in list(self.workers):
            if worker.task is not None or not worker.ready:
                continue
            task = self._next_task()
            if task is None:
                return
            try:
                worker.conn.send_bytes(task.id.to_bytes(8, "little") + task.payload)
            except OSError:
                # died while idle (OOM killer, someone's kill): the call never started, so retry it
                with self.lock:
                    self.queue.appendleft(task)
                self._replace(worker)
                continue
            worker.task = task
            worker.deadline = time.monotonic() + task.timeout

    def _collect(self, worker: _Worker) -> None:
        task = worker.task
        assert task is not None
        try:
            data = worker.conn.recv_bytes() if worker.conn.poll() else None
        except (EOFError, OSError):
            data = None
        if data is None:
            worker.process.join(timeout=1)
            self.counters["crashes"] += 1
            code = worker.process.exitcode
            self._deliver(
                task,
                WorkerCrashedError(
                    f"process pool {self.name!r}: worker {worker.process.pid} died (exit code {code}) "
                    f"while running {task.fn_name}"
                ),
            )
            worker.task = None
            self._replace(worker)
            return
        try:
            _, ok, value = pickle.loads(data)
        except Exception as exc:
            ok, value = False, RemoteError(f"cannot unpickle the worker's reply: {exc!r}")
        worker.task = None
        worker.done += 1
        self.counters["calls"] += 1
        self._deliver(task, value if ok or isinstance(value, BaseException) else RemoteError(repr(value)))
        if self.max_tasks_per_worker and worker.done >= self.max_tasks_per_worker:
            self._replace(worker)

    def _time_out(self, worker: _Worker) -> None:
        task = worker.task
        assert task is not None
        pid = worker.process.pid
        worker.task = None
        self._replace(worker)
        self.counters["timeouts"] += 1
        self._deliver(
            task,
            JudgeTimeoutError(
                self.name, task.timeout, f"{task.fn_name} overran its deadline; worker {pid} was killed"
            ),
        )

    def _replace(self, worker: _Worker) -> None:
        self._stop(worker)
        with contextlib.suppress(ValueError):
            self.workers.remove(worker)
        # _start_workers (next loop turn) brings the pool back to size

    @staticmethod
    def _stop(worker: _Worker) -> None:
        process = worker.process
        with contextlib.suppress(OSError, ValueError, AttributeError):
            if process.is_alive():
                process.kill()
            process.join(timeout=5)
        with contextlib.suppress(OSError):
            worker.conn.close()
        with contextlib.suppress(ValueError, AttributeError):
            process.close()

    @staticmethod
    def _deliver(task: _Task, value: Any) -> None:
        for batch, index in task.targets:
            batch.set(index, value)

    def alive_pids(self) -> list[int]:
        return [w.process.pid for w in list(self.workers) if w.process.pid is not None]


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
            from multiprocessing.context import reduction, set_spawning_popen

            class Popen(popen_forkserver.Popen):  # type: ignore[misc,name-defined]
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
                    self.sentinel, w = forkserver.connect_to_new_process(self._fds)
                    parent_w = os.dup(w)  # the child's sentinel of its parent, as multiprocessing does
                    self.finalizer = util.Finalize(self, util.close_fds, (parent_w, self.sentinel))
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


def _worker_process_class(ctx: Any) -> Any:
    if ctx.get_start_method() == "forkserver" and _WorkerProcess is not None:
        return _WorkerProcess
    return ctx.Process


def _default_start_method() -> str:
    return "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"


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
        timeout: float = DEFAULT_TIMEOUT,
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
        start_method = start_method or _default_start_method()
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

    def _submit(self, fn: Callable[..., Any], calls: Sequence[Call], timeout: float | None) -> _Batch:
        timeout = self.timeout if timeout is None else _check_timeout(timeout)
        batch = _Batch(len(calls))
        name = _fn_name(fn)
        tasks: dict[bytes, _Task] = {}
        for index, (args, kwargs) in enumerate(calls):
            try:
                payload = pickle.dumps((fn, tuple(args), dict(kwargs)), protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:
                batch.set(index, exc)
                continue
            if len(payload) > self.max_input_bytes:
                batch.set(
                    index,
                    InputTooLargeError(
                        f"input too large: the call to {name} pickles to {len(payload):,} bytes, over the "
                        f"process pool's cap of {self.max_input_bytes:,} bytes (max_input_bytes)"
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
        self, fn: Callable[..., Any], calls: Sequence[Call], *, timeout: float | None = None
    ) -> list[Any]:
        """Run ``fn(*args, **kwargs)`` for each ``(args, kwargs)``; each entry is a value or an exception.

        Identical calls run once. If the awaiting task is cancelled, calls not yet started are dropped.
        """
        batch = self._submit(fn, calls, timeout)
        try:
            return await asyncio.wrap_future(batch.future)
        except asyncio.CancelledError:
            batch.cancelled = True
            raise

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


# --- the process-wide shared pool -----------------------------------------------------------------

_shared: ProcessPool | None = None
_shared_options: dict[str, Any] = {}
_shared_lock = threading.Lock()


def _default_preload() -> list[str]:
    # math_verify takes ~0.4 s to import: once in the fork server instead of once per worker
    return [m for m in ("judger.runtime.procpool.worker", "math_verify") if importlib.util.find_spec(m)]


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
            options = {"preload": _default_preload(), "name": "shared_pool", **_shared_options}
            pool = _shared = ProcessPool(**options)
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


def _forget_parents_fork_server() -> None:
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


def _after_fork_in_child() -> None:
    global _shared_lock, _shared
    # the lock may have been held by another thread at fork time; the pool is the parent's
    _shared_lock = threading.Lock()
    _shared = None
    _forget_parents_fork_server()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
