"""A fixed budget of daemon threads for sync reward handlers, with hung calls counted.

A Python thread cannot be killed: a call that overruns its deadline keeps its thread until it
returns, if ever. :class:`HandlerThreads` keeps ``workers`` threads for calls and tolerates up to
``max_hung`` abandoned calls beside them, each replaced by a fresh worker; past that the pool
shrinks instead of growing, and once every thread it may have is hung a call fails at once with
:class:`ThreadBudgetError` (naming ``execution="process"``, whose calls run in killable
processes). A hung call that returns gives its thread back. The threads are daemon threads: an
abandoned call never delays the interpreter's exit.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from judger.core.errors import JudgerError

logger = logging.getLogger(__name__)

DEFAULT_MAX_HUNG = 16


class ThreadBudgetError(JudgerError, RuntimeError):
    """Every thread a sync handler may use is held by a call that overran its deadline."""


class Job:
    """One call submitted to :class:`HandlerThreads`: its future and whether it was abandoned."""

    __slots__ = ("abandoned", "args", "fn", "future")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.fn = fn
        self.args = args
        self.future: Future[Any] = Future()
        self.abandoned = False


class HandlerThreads:
    """``workers`` daemon threads for sync calls, plus at most ``max_hung`` threads left to calls
    abandoned by their caller (:meth:`abandon`). Threads start on demand, as in
    ``ThreadPoolExecutor``."""

    def __init__(self, workers: int, max_hung: int = DEFAULT_MAX_HUNG, *, name: str = "judger") -> None:
        if workers < 1 or max_hung < 0:
            raise ValueError(f"workers must be >= 1 and max_hung >= 0, got {workers}, {max_hung}")
        self.workers = workers
        self.max_hung = max_hung
        self.name = name
        self._queue: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = threading.Semaphore(0)
        self._working = 0  # threads taking calls (idle or busy), not hung
        self._hung = 0  # threads held by abandoned calls
        self._closed = False

    @property
    def hung(self) -> int:
        """Calls abandoned by their caller and still running."""
        return self._hung

    @property
    def threads(self) -> int:
        """Threads alive or about to be: workers and hung ones."""
        return self._working + self._hung

    def _exhausted(self) -> ThreadBudgetError:
        return ThreadBudgetError(
            f"all {self.workers + self.max_hung} threads of {self.name!r} are held by handler calls "
            f"that overran their deadline ({self._hung} hung); a Python thread cannot be stopped: run "
            'this handler with execution="process" (killable worker processes), or fix what hangs'
        )

    def submit(self, fn: Callable[..., Any], *args: Any) -> Job:
        """Queue ``fn(*args)``; raises :class:`ThreadBudgetError` when no thread can ever take it."""
        job = Job(fn, args)
        if not self._closed and self._idle.acquire(blocking=False):  # an idle worker will take it
            self._queue.put(job)
            return job
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self.name}: the handler threads are shut down")
            if self._working == 0 and self._hung >= self.workers + self.max_hung:
                raise self._exhausted()
            start = self._working < self.workers and self._working + self._hung < self.workers + self.max_hung
            if start:
                self._working += 1
        self._queue.put(job)
        if start:
            self._start()
        return job

    def _start(self) -> None:
        threading.Thread(target=self._work, name=f"{self.name}-{self.threads}", daemon=True).start()

    def abandon(self, job: Job, *, overran: bool = True) -> None:
        """The caller stopped waiting for ``job``: a queued one never runs; a running one keeps its
        thread, which counts as hung until the call returns (logged when it ``overran`` its
        deadline, rather than being cancelled with its batch)."""
        with self._lock:
            if job.future.done() or job.abandoned:
                return
            job.abandoned = True
            if job.future.cancel():  # still queued: it never runs
                return
            self._working -= 1
            self._hung += 1
            hung = self._hung
            exhausted = self._working == 0 and hung >= self.workers + self.max_hung
            # what waits in the queue may have counted on this thread: a replacement takes it
            replace = (
                not self._closed
                and not self._queue.empty()
                and self._working + self._hung < self.workers + self.max_hung
            )
            if replace:
                self._working += 1
        if replace:
            self._start()
        if overran:
            logger.warning(
                "judger: a call on %r overran its deadline and still holds its thread (%d hung of at "
                'most %d threads); a Python thread cannot be stopped: use execution="process" for handlers '
                "that can hang",
                self.name,
                hung,
                self.workers + self.max_hung,
            )
        if exhausted:
            self._fail_queued()

    def _fail_queued(self) -> None:
        # no thread is left to take what waits: fail it now rather than never
        error = self._exhausted()
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                return
            if job is None:
                self._queue.put(None)
                return
            if job.future.set_running_or_notify_cancel():
                job.future.set_exception(error)

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                self._queue.put(None)  # wake the next worker to stop too
                with self._lock:
                    self._working -= 1
                return
            if not job.future.set_running_or_notify_cancel():
                self._idle.release()
                continue
            try:
                job.future.set_result(job.fn(*job.args))
            except BaseException as exc:
                job.future.set_exception(exc)
            with self._lock:
                if job.abandoned:  # this thread was counted hung: it works again, or leaves
                    self._hung -= 1
                    if self._working >= self.workers or self._closed:
                        return
                    self._working += 1
            job = None  # the result is the caller's: this thread keeps no reference while idle
            self._idle.release()

    def shutdown(self) -> None:
        """Stop the idle workers; running calls finish on their own (never waited for)."""
        with self._lock:
            self._closed = True
        self._queue.put(None)
