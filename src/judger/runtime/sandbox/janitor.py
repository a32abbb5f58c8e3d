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

    def advance(self) -> bool:
        """One attempt at giving everything back; True once it is all given back."""
        if self.popen is not None:
            if self.popen.poll() is None:
                return False
            self.popen = None
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


class _Janitor:
    def __init__(self) -> None:
        self._jobs: list[Remains] = []
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._last_sweep = 0.0

    def submit(self, remains: Remains) -> concurrent.futures.Future[None]:
        # running from the start: a waiter that gives up (a cancelled wrap_future) cannot cancel it
        remains.done.set_running_or_notify_cancel()
        with self._wake:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="judger-sandbox-janitor", daemon=True)
                self._thread.start()
            self._jobs.append(remains)
            self._wake.notify()
        return remains.done

    def pending(self) -> int:
        with self._wake:
            return len(self._jobs)

    def drain(self, timeout: float) -> bool:
        """Wait until every job is done, at most ``timeout`` seconds; whether they all are."""
        deadline = time.monotonic() + timeout
        with self._wake:
            while self._jobs and time.monotonic() < deadline:
                self._wake.wait(0.01)
            return not self._jobs

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._jobs:
                    self._sweep()
                    self._wake.wait(_SWEEP_EVERY_S)
                jobs = list(self._jobs)
            now = time.monotonic()
            finished = [job for job in jobs if job.next_try <= now and self._attempt(job, now)]
            with self._wake:
                for job in finished:
                    self._jobs.remove(job)
                self._wake.notify_all()
                if self._jobs:
                    soonest = min(job.next_try for job in self._jobs)
                    self._wake.wait(max(0.0, soonest - time.monotonic()))

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

    def _sweep(self) -> None:
        now = time.monotonic()
        if now - self._last_sweep >= _SWEEP_EVERY_S:
            self._last_sweep = now
            with contextlib.suppress(OSError):
                cgroups.sweep()

    def forget(self) -> None:
        """In a forked child: the parent's sandboxes are the parent's to tear down."""
        self._jobs = []
        self._wake = threading.Condition()
        self._thread = None


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
