"""Finding the sandbox's processes from a test, to prove none outlives its sample.

Only processes that descend from the calling process count: other sessions may share the machine
and run sandboxes of their own.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

# command lines of the sandbox's processes (bubblewrap, supervisor, worker) in either isolation mode
SANDBOX_MARKS = (b"/opt/judger-sandbox/", b"sandbox/inside/supervisor.py", b"sandbox/inside/worker.py")


def cmdlines() -> dict[int, bytes]:
    """Every live process's command line (those that exit while being read are skipped)."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                found[int(entry)] = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
    return found


def processes_with(mark: bytes) -> list[int]:
    """Processes, anyone's, whose command line contains ``mark``."""
    return [pid for pid, cmdline in cmdlines().items() if mark in cmdline]


def descends_from_us(pid: int) -> bool:
    """Whether ``pid`` descends from this process."""
    me = os.getpid()
    for _ in range(64):
        if pid == me:
            return True
        if pid <= 1:
            return False
        try:
            stat = Path(f"/proc/{pid}/stat").read_bytes()
        except OSError:
            return False
        pid = int(stat[stat.rfind(b")") + 2 :].split()[1])
    return False


def sandbox_processes() -> list[int]:
    """This process's sandbox descendants still alive."""
    return [
        pid
        for pid, cmdline in cmdlines().items()
        if any(mark in cmdline for mark in SANDBOX_MARKS) and descends_from_us(pid)
    ]


def sandbox_processes_after(timeout_s: float = 5.0) -> list[int]:
    """The sandbox descendants still alive once ``timeout_s`` has passed or none is left."""
    deadline = time.monotonic() + timeout_s
    left = sandbox_processes()
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = sandbox_processes()
    return left
