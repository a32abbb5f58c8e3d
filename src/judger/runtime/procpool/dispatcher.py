"""The dispatcher behind :class:`~judger.runtime.procpool.pool.ProcessPool`: one thread that owns
all worker I/O, enforces every call's deadline and hands results over through futures."""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing as mp
import os
import pickle
import selectors
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from multiprocessing.connection import Connection
from typing import Any

from judger.core.errors import JudgeTimeoutError
from judger.runtime.procpool.errors import PoolClosedError, RemoteError, WorkerCrashedError
from judger.runtime.procpool.forkserver import server_preload, started_deaf, worker_process_class
from judger.runtime.procpool.worker import READY, worker_main

STARTUP_TIMEOUT = 120.0
"""A worker that has not finished importing its preload modules by then is killed."""
MAX_START_FAILURES = 3
"""Workers dying this many times in a row before becoming ready fail the waiting calls (and stop
the pool's start until a call asks again)."""
_CHUNK_MAX = 64
"""Most calls handed to a worker in one message. Each call still has its own deadline, from the
moment the worker's reply to the call before it arrives, and a call that overruns fails alone: the
worker is killed and the calls queued behind it go back to the front of the queue."""


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
    __slots__ = ("conn", "deadline", "done", "generation", "process", "ready", "started", "tasks")

    def __init__(self, process: Any, conn: Connection, started: float, generation: int = 0) -> None:
        self.process = process
        self.generation = generation  # of the pool's preload list it imported
        self.conn = conn
        # the chunk handed over and not yet answered, in order: the head is the call running now
        self.tasks: deque[_Task] = deque()
        self.ready = False  # set by the worker's READY message, once its imports are done
        self.started = started
        self.deadline = started + STARTUP_TIMEOUT  # of the start-up, then of the head call
        self.done = 0

    @property
    def watched(self) -> bool:
        """Starting up or running calls: the dispatcher enforces its deadline."""
        return bool(self.tasks) or not self.ready


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
        # what each worker also imports before READY, not its fork server (a caller's own modules);
        # each addition is a generation: a worker of an older one is replaced before it takes calls
        self.worker_preload: tuple[str, ...] = ()
        self.generation = 0
        self.start_failures = 0
        self.size = workers
        self.ctx = mp.get_context(start_method)
        self.process_class = worker_process_class(self.ctx)
        if start_method == "forkserver" and preload:
            self.ctx.set_forkserver_preload(server_preload(preload, shared=True))
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
        self.counters = {"calls": 0, "timeouts": 0, "crashes": 0, "workers_started": 0, "handoffs": 0}
        self.startup_seconds: list[float] = []
        self.warm = False  # start() asked for the workers before any call
        # one selector for the dispatcher's whole life: the wake pipe, and each worker's pipe and
        # process sentinel from its start to its stop (rebuilding one per turn cost as much as
        # the event loop on trivial answers)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.wake_r, selectors.EVENT_READ, None)

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

    def add_worker_preload(self, modules: Iterable[str]) -> None:
        with self.lock:
            new = tuple(m for m in dict.fromkeys(modules) if m not in self.preload + self.worker_preload)
            if not new:
                return
            self.worker_preload += new
            self.generation += 1
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
            pending.extend(worker.tasks)
            worker.tasks.clear()
            self._stop(worker)
        self.workers.clear()
        for task in pending:
            self._deliver(task, error)
        with contextlib.suppress(OSError, ValueError):
            self.selector.close()
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
                ready = self._wait(busy)
                if self.closed:
                    return
                for w, exited in ready.items():
                    if w not in self.workers:
                        continue
                    if w.ready:
                        self._collect(w, exited)
                    else:
                        self._collect_ready(w)
                self._check_deadlines(busy)
        except BaseException as exc:  # a bug here must not leave callers waiting forever
            self._fail_everything(exc)

    def _wait(self, busy: list[_Worker]) -> dict[_Worker, bool]:
        """Wait for a worker's message or exit, a wake-up or the first deadline among ``busy``;
        return ``{worker: its process has exited}`` for the workers that have something."""
        timeout = None
        if busy:
            timeout = max(0.0, min(w.deadline for w in busy) - time.monotonic())
        events = self.selector.select(timeout)
        ready: dict[_Worker, bool] = {}  # worker -> its process has exited
        for key, _ in events:
            if key.data is None:
                with contextlib.suppress(BlockingIOError, OSError):
                    while os.read(self.wake_r, 4096):
                        pass
            else:
                worker, is_sentinel = key.data
                ready[worker] = ready.get(worker, False) or is_sentinel
        return ready

    def _check_deadlines(self, busy: list[_Worker]) -> None:
        now = time.monotonic()
        for w in busy:
            if w not in self.workers:
                continue
            if w.tasks and now >= w.deadline:
                self._time_out(w)
            elif not w.ready and now >= w.deadline:
                self._start_failed(w, f"not ready after {STARTUP_TIMEOUT:g} s")

    def _fail_everything(self, exc: BaseException) -> None:
        with self.lock:
            self.closed = True
            pending = list(self.queue)
            self.queue.clear()
        error = RuntimeError(f"process pool {self.name!r} dispatcher failed: {exc!r}")
        for w in self.workers:
            pending.extend(w.tasks)
            w.tasks.clear()
        for task in pending:
            self._deliver(task, error)

    def _start_workers(self) -> None:
        # Start lazily, all at once: a batch keeps every worker busy anyway.
        while len(self.workers) < self.size and (self.queue or self.workers or self.warm) and not self.closed:
            parent_conn, child_conn = self.ctx.Pipe(duplex=True)
            with self.lock:
                preload, generation = self.preload + self.worker_preload, self.generation
            process = self.process_class(
                target=worker_main,
                args=(child_conn, self.memory_limit_bytes, preload),
                name=f"judger-{self.name}-worker",
                daemon=True,
            )
            # a worker, or the fork server it comes from, is born deaf to Ctrl-C (its own start-up
            # would print a traceback); it then ignores it: the pool decides when workers stop
            started_deaf(process.start)
            child_conn.close()
            worker = _Worker(process, parent_conn, time.monotonic(), generation)
            self.selector.register(parent_conn, selectors.EVENT_READ, (worker, False))
            self.selector.register(process.sentinel, selectors.EVENT_READ, (worker, True))
            self.workers.append(worker)
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
        # every start fails (a preload module that crashes, no memory): answer the waiting calls,
        # and stop the starts under way and the warming up until a call asks again, or each
        # failed start would be followed by another for ever
        self.start_failures = 0
        with self.lock:
            self.warm = False
            pending = list(self.queue)
            self.queue.clear()
        for other in [w for w in self.workers if not w.ready]:
            self._replace(other)
        error = WorkerCrashedError(
            f"process pool {self.name!r}: worker processes fail to start "
            f"({MAX_START_FAILURES} in a row, last: {why})"
        )
        for task in pending:
            self._deliver(task, error)

    def _next_chunk(self, limit: int) -> list[_Task]:
        chunk: list[_Task] = []
        with self.lock:
            queue = self.queue
            # guided: about half of a fair share of what waits, so that workers finish together
            want = max(1, min(limit, _CHUNK_MAX, len(queue) // (2 * max(1, len(self.workers)))))
            while queue and len(chunk) < want:
                task = queue.popleft()
                if not task.cancelled:
                    chunk.append(task)
        return chunk

    def _requeue(self, tasks: Iterable[_Task]) -> None:
        """Calls handed to a worker that never started them go back to the front, in order."""
        with self.lock:
            self.queue.extendleft(reversed(list(tasks)))

    def _dispatch(self) -> None:
        stale = False
        for worker in list(self.workers):
            if worker.tasks or not worker.ready:
                continue
            if worker.generation != self.generation and self.queue:
                # started before a caller's modules were added: its replacement imports them, so
                # that no call's deadline pays for that
                self._replace(worker)
                stale = True
                continue
            limit = _CHUNK_MAX
            if self.max_tasks_per_worker:
                limit = max(1, self.max_tasks_per_worker - worker.done)
            chunk = self._next_chunk(limit)
            if not chunk:
                break
            # one message for the whole chunk: frames of (8-byte id, 8-byte length, payload)
            message = b"".join(
                task.id.to_bytes(8, "little") + len(task.payload).to_bytes(8, "little") + task.payload
                for task in chunk
            )
            try:
                worker.conn.send_bytes(message)
            except OSError:
                # died while idle (OOM killer, someone's kill): the calls never started, so retry them
                self._requeue(chunk)
                self._replace(worker)
                continue
            worker.tasks.extend(chunk)
            self.counters["handoffs"] += 1
            worker.deadline = time.monotonic() + chunk[0].timeout
        if stale:
            self._start_workers()

    def _collect(self, worker: _Worker, exited: bool) -> None:
        """Take every reply the worker has sent; a worker that died fails the call it was running."""
        conn = worker.conn
        while True:
            try:
                if not conn.poll():
                    break
                data = conn.recv_bytes()
            except (EOFError, OSError):
                exited = True
                break
            if not worker.tasks:
                continue  # nothing was asked of it: a stray message
            task = worker.tasks.popleft()
            try:
                _, ok, value = pickle.loads(data)
            except Exception as exc:
                ok, value = False, RemoteError(f"cannot unpickle the worker's reply: {exc!r}")
            worker.done += 1
            self.counters["calls"] += 1
            self._deliver(task, value if ok or isinstance(value, BaseException) else RemoteError(repr(value)))
            if worker.tasks:
                # the next call started when this reply was sent: never earlier than now
                worker.deadline = time.monotonic() + worker.tasks[0].timeout
        if exited:
            self._lost(worker)
        elif not worker.tasks and self.max_tasks_per_worker and worker.done >= self.max_tasks_per_worker:
            self._replace(worker)

    def _lost(self, worker: _Worker) -> None:
        if worker.tasks:
            task = worker.tasks.popleft()
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
            self._requeue(worker.tasks)
            worker.tasks.clear()
        self._replace(worker)

    def _time_out(self, worker: _Worker) -> None:
        task = worker.tasks.popleft()
        pid = worker.process.pid
        self._requeue(worker.tasks)
        worker.tasks.clear()
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

    def _stop(self, worker: _Worker) -> None:
        process = worker.process
        for fileobj in (worker.conn, process.sentinel):
            with contextlib.suppress(KeyError, ValueError, OSError):
                self.selector.unregister(fileobj)
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
