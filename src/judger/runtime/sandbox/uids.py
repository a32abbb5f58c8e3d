"""A host uid of its own for each sandbox, when the judge runs as root.

bubblewrap run by root maps the sandbox's uid onto root itself: the kernel then treats the program
as the owner of every root-owned file it can see (``/dev`` nodes included) and charges its per-user
quotas (inotify instances, pipe buffers, RLIMIT_NPROC) to host root, which RLIMIT_NPROC never
bounds. So a root judge runs each sandbox under a uid that no one else uses: taken from a range
that systemd documents as unused (``0x70000000``-``0x7FFDFFFF``), one per live sandbox on the host,
held through an advisory lock on a file per uid so that several judge processes never share one.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import random
import tempfile

# systemd's UIDS-GIDS.md: 0x70000000-0x7FFDFFFF is assigned to nothing (container ranges end below,
# the "foreign" and signed-overflow ranges start above)
FIRST_UID = 0x70000000
SLOTS = 1 << 16


class UidLease:
    """One uid, held until :meth:`release` (the lock file stays for the next holder)."""

    def __init__(self, uid: int, fd: int) -> None:
        self.uid = uid
        self._fd = fd

    def release(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)  # closing the descriptor drops the lock
            self._fd = -1


@functools.lru_cache(maxsize=1)
def _lock_dir() -> str:
    """Made (and checked to be ours) once per process, not once per sample."""
    for base in ("/run", tempfile.gettempdir()):
        path = os.path.join(base, "judger-sandbox-uids")
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
            if os.stat(path).st_uid == os.geteuid():
                return path
        except OSError:
            continue
    raise OSError("no directory for the sandbox uid locks (tried /run and the temp dir)")


def lease() -> UidLease:
    """A uid no other live sandbox on this host holds."""
    directory = _lock_dir()
    start = random.randrange(SLOTS)
    for step in range(SLOTS):
        slot = (start + step) % SLOTS
        fd = os.open(os.path.join(directory, str(slot)), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return UidLease(FIRST_UID + slot, fd)
    raise OSError(f"all {SLOTS} sandbox uids are in use")
