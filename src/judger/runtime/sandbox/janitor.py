"""The host's teardown of sandboxes, on a thread of its own: nothing a sample takes outlives it.

When a sample ends, however it ends (its tests done, early stop, a cancel, its event loop closing
under it, an error), its sandbox is killed at once, synchronously, and what remains is handed here
(:func:`submit`). What the kernel then takes its time over -- the processes of a PID namespace
exiting, a scratch tmpfs with many inodes unmounting, a cgroup emptying -- is waited for on this
thread, not on an event loop and not inside the sample's deadline: the host process is reaped, the
cgroup removed once empty, the uid lease given back only once no process of that uid is left, the
pidfd closed, a host scratch folder removed. Nothing is given up: a sandbox whose teardown takes
longer is tried again, with a growing pause, for as long as the judge lives; and while the queue is
empty, every few seconds, the judge sweeps the cgroup folders left over (:func:`cgroups.sweep`).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import logging
import os
import select
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field

from judger.runtime.sandbox import cgroups, uids

logger = logging.getLogger(__name__)

_FIRST_PAUSE_S = 0.002
_LONGEST_PAUSE_S = 1.0
_SWEEP_EVERY_S = 5.0
_EXIT_WAIT_S = 5.0


def _exited(pidfd: int) -> bool:
    """Whether the process behind ``pidfd`` has exited (a pidfd polls readable from then on)."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(0))


@dataclass
class Remains:
    """What a killed sandbox still holds, given back in this order once the kernel lets go."""

    popen: subprocess.Popen[bytes] | None = None
    """The host's child (bubblewrap, or the unconfined supervisor): reaped here."""
    pidfd: int = -1
    """The sandbox's first process: once it has exited, so has every process of its PID namespace."""
    group: cgroups.SandboxCgroup | None = None
    uid: uids.UidLease | None = None
    scratch: str | None = None
    done: concurrent.futures.Future[None] = field(default_factory=concurrent.futures.Future)
    tries: int = 0
    next_try: float = 0.0
    watch: int = -1
    """A pidfd of ``popen``: the janitor sleeps on it until that process exits."""

    def advance(self) -> bool:
        """One attempt at giving everything back; True once it is all given back."""
        if self.popen is not None:
            if self.popen.poll() is None:
                return False
            self.popen = None
            self._close_watch()
        if self.pidfd >= 0:
            if not _exited(self.pidfd):
                return False
            os.close(self.pidfd)
            self.pidfd = -1
        if self.group is not None:
            if not self.group.remove():
                self.group.kill()  # v1: a fork may have raced the first kill
                return False
            self.group = None
        if self.uid is not None:
            self.uid.release()  # only now: no process of that uid is left
            self.uid = None
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None
        return True

    def waits_on(self) -> int:
        """The descriptor whose readiness means the next attempt may succeed, or -1 (then a pause)."""
        return self.watch if self.popen is not None else -1

    def _close_watch(self) -> None:
        if self.watch >= 0:
            os.close(self.watch)
            self.watch = -1


class _Janitor:
    def __init__(self) -> None:
        self._jobs: list[Remains] = []
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._last_sweep = 0.0

    def submit(self, remains: Remains) -> concurrent.futures.Future[None]:
        # running from the start: a waiter that gives up (a cancelled wrap_future) cannot cancel it
        remains.done.set_running_or_notify_cancel()
        if remains.popen is not None:
            with contextlib.suppress(OSError, AttributeError):  # no pidfds: the pauses alone
                remains.watch = os.pidfd_open(remains.popen.pid)
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="judger-sandbox-janitor", daemon=True)
                self._thread.start()
            self._jobs.append(remains)
        self._wake()
        return remains.done

    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.write(self._wake_w, b"x")

    def pending(self) -> int:
        with self._lock:
            return len(self._jobs)

    def drain(self, timeout: float) -> bool:
        """Wait until every job is done, at most ``timeout`` seconds; whether they all are."""
        deadline = time.monotonic() + timeout
        while self.pending() and time.monotonic() < deadline:
            time.sleep(0.01)
        return not self.pending()

    def _run(self) -> None:
        while True:
            with self._lock:
                jobs = list(self._jobs)
            now = time.monotonic()
            finished = [job for job in jobs if job.next_try <= now and self._attempt(job, now)]
            if finished:
                with self._lock:
                    self._jobs = [job for job in self._jobs if job not in finished]
                    jobs = list(self._jobs)
            if not jobs:
                self._sweep(now)
            self._sleep(jobs)

    def _sleep(self, jobs: list[Remains]) -> None:
        """Until a job's process exits, a job's pause ends, or a job is submitted."""
        poller = select.poll()
        poller.register(self._wake_r, select.POLLIN)
        watched: dict[int, Remains] = {}
        for job in jobs:
            fd = job.waits_on()
            if fd >= 0:
                watched[fd] = job
                poller.register(fd, select.POLLIN)
        paused = [job.next_try for job in jobs if job.waits_on() < 0]
        timeout = _SWEEP_EVERY_S if not jobs else _LONGEST_PAUSE_S
        if paused:
            timeout = min(timeout, max(0.0, min(paused) - time.monotonic()))
        for fd, _ in poller.poll(timeout * 1000):
            if fd == self._wake_r:
                with contextlib.suppress(BlockingIOError):
                    os.read(self._wake_r, 4096)
            elif fd in watched:
                watched[fd].next_try = 0.0

    @staticmethod
    def _attempt(job: Remains, now: float) -> bool:
        try:
            finished = job.advance()
        except Exception:  # one sandbox's teardown failing never stops the others'
            logger.warning("judger: a sandbox's teardown failed; trying again", exc_info=True)
            finished = False
        if finished:
            job.done.set_result(None)
            return True
        job.tries += 1
        job.next_try = now + min(_LONGEST_PAUSE_S, _FIRST_PAUSE_S * 1.5**job.tries)
        return False

    def _sweep(self, now: float) -> None:
        if now - self._last_sweep >= _SWEEP_EVERY_S:
            self._last_sweep = now
            with contextlib.suppress(OSError):
                cgroups.sweep()

    def forget(self) -> None:
        """In a forked child: the parent's sandboxes are the parent's to tear down."""
        self._jobs = []
        self._lock = threading.Lock()
        self._thread = None
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)


_janitor = _Janitor()
os.register_at_fork(after_in_child=_janitor.forget)
# daemon threads run on while atexit handlers do: a judge that exits gives its last sandboxes a
# moment (bubblewrap's --die-with-parent kills them anyway; a later judge sweeps their folders)
atexit.register(lambda: _janitor.drain(_EXIT_WAIT_S))


def submit(remains: Remains) -> concurrent.futures.Future[None]:
    """Tear ``remains`` down in the background; the future is done once all of it is given back."""
    return _janitor.submit(remains)


def pending() -> int:
    """Sandboxes of this process not yet fully torn down."""
    return _janitor.pending()
