"""Ctrl-C and the processes judger starts.

A terminal's Ctrl-C reaches the whole foreground process group: every worker, shard and fork server
judger started, not only the command. They must not each print a KeyboardInterrupt traceback under
the command's one-line message; their parent decides when they stop. So they ignore SIGINT
(:func:`ignore_interrupts`), and the parent starts them inside :func:`interrupts_held`, so that the
signal cannot reach them in their first milliseconds, before they get there.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """SIGINT blocked in this thread while inside: a process started meanwhile (forked, or a program
    executed: a fork server) is born with it blocked, and unblocks it in :func:`ignore_interrupts`.
    A Ctrl-C meanwhile stays pending here and reaches this thread's handler when the block ends.

    Only blocked, never ignored here: multiprocessing unblocks SIGINT after it starts its resource
    tracker, and a signal that arrives unblocked while ignored is lost."""
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - not POSIX
        yield
        return
    was_blocked = signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        if not was_blocked:  # blocked by a caller: theirs to unblock
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def ignore_interrupts() -> None:
    """Ignore SIGINT from now on in this process, and unblock it (:func:`interrupts_held` may have
    started it blocked): a process of judger's own, whose parent decides when it stops."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
