"""The dispatcher behind :class:`~judger.runtime.procpool.pool.ProcessPool`: one thread that owns
all worker I/O, enforces every call's deadline and hands results over through futures."""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing as mp
import os
import pickle
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from multiprocessing.connection import Connection, wait
from typing import Any

from judger.core.errors import JudgeTimeoutError
from judger.runtime.procpool.errors import PoolClosedError, RemoteError, WorkerCrashedError
from judger.runtime.procpool.forkserver import worker_process_class
from judger.runtime.procpool.worker import READY, worker_main

STARTUP_TIMEOUT = 120.0
"""A worker that has not finished importing its preload modules by then is killed."""
MAX_START_FAILURES = 3
"""Workers dying this many times in a row before becoming ready fail the waiting calls."""


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
        self.process_class = worker_process_class(self.ctx)
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
