"""Which content of a file an index of ``judger view`` was built from, and whether the file still
holds it.

An index pairs the verdicts it computed with rows it reads back from the file (a sample's whole row
is read when it is opened), and it is kept in a cache to open the same file again at once. Both
are right only while the file holds what was indexed. A path is not that: ``x.jsonl`` typed in
another folder is another file. Size and modification time are not either: a file rewritten with
the same size keeps its mtime when the writer sets it back (``touch -r``, ``rsync``, ``cp -p``) or
writes within the clock's tick. So a file is known by its :class:`Identity`: the resolved path,
device and inode (the same file), size, mtime and ctime (which no one can set back: any write or
utime moves it), and a fingerprint of its content (:func:`fingerprint`) for what the clock misses.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from judger.core.errors import InputError

# files up to this size are hashed whole; a bigger one at SAMPLES evenly spaced blocks of BLOCK
WHOLE = 8 << 20
BLOCK = 64 << 10
SAMPLES = 64


class FileChanged(InputError):
    """The file was changed since it was indexed: its rows no longer match the index's verdicts."""


@dataclass(frozen=True)
class Identity:
    """The file a path names and the state of its content (see the module docstring)."""

    path: str
    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, path: str | Path) -> Identity:
        resolved = Path(path).resolve()
        st = resolved.stat()
        return cls(str(resolved), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def changed_message(shown_as: str | Path) -> str:
    return (
        f"{shown_as} was changed on disk since it was indexed: what is shown is the file as it was; "
        "run judger view again to see it as it is now"
    )


def fingerprint(path: str | Path, size: int) -> str:
    """A hash of the file's first ``size`` bytes: of all of them up to :data:`WHOLE`, else of
    :data:`SAMPLES` blocks spread evenly over them, the first and the last included (bounded
    reading, whatever the size: the cache must open a big file at once)."""
    digest = hashlib.blake2b(str(size).encode(), digest_size=16)
    with open(path, "rb") as fh:
        if size <= WHOLE:
            digest.update(fh.read(size))
        else:
            step = (size - BLOCK) / (SAMPLES - 1)
            for k in range(SAMPLES):
                fh.seek(int(k * step))
                digest.update(fh.read(BLOCK))
    return digest.hexdigest()


# how a file stands against what was indexed: the same; appended to (what was read is still there,
# as in a file `judger eval -o` is still writing); or changed
SAME, GROWN, CHANGED = "same", "grown", "changed"


@lru_cache(maxsize=64)
def _holds_prefix(then: Identity, fingerprinted: str, now: Identity) -> bool:
    """Whether the file, now ``now``, still begins with the ``then.size`` bytes fingerprinted (once
    per state of the file: a page asks every few seconds)."""
    try:
        return fingerprint(then.path, then.size) == fingerprinted
    except OSError:
        return False


@dataclass(frozen=True)
class Snapshot:
    """A file's :class:`Identity` and :func:`fingerprint`, taken together before it is read."""

    identity: Identity
    fingerprint: str

    @classmethod
    def of(cls, path: str | Path) -> Snapshot:
        identity = Identity.of(path)
        return cls(identity, fingerprint(identity.path, identity.size))

    def as_facts(self) -> dict[str, Any]:
        return {"identity": self.identity.as_dict(), "fingerprint": self.fingerprint}

    @classmethod
    def from_facts(cls, facts: dict[str, Any]) -> Snapshot:
        return cls(Identity(**facts["identity"]), facts["fingerprint"])

    def state(self) -> str:
        """:data:`SAME`, :data:`GROWN` or :data:`CHANGED` (by the file's identity: same is not read
        again; grown is the same file, as long or longer, its first bytes as fingerprinted)."""
        then = self.identity
        try:
            now = Identity.of(then.path)
        except OSError:  # removed, or made unreadable
            return CHANGED
        if now == then:
            return SAME
        if (now.device, now.inode) != (then.device, then.inode) or now.size < then.size:
            return CHANGED
        return GROWN if _holds_prefix(then, self.fingerprint, now) else CHANGED

    def still(self) -> bool:
        """Whether the file holds exactly what it held when this was taken: its identity, then its
        fingerprint (what a rewrite within the clock's tick leaves the identity as it was)."""
        if self.state() != SAME:
            return False
        try:
            return fingerprint(self.identity.path, self.identity.size) == self.fingerprint
        except OSError:
            return False

    def after_reading(self, shown_as: str | Path) -> None:
        """Raise :class:`FileChanged` if the file changed while it was read (the index would pair
        rows of two versions of it); rows appended meanwhile are no change."""
        if self.state() != GROWN and not self.still():
            raise FileChanged(f"{shown_as} was changed while it was indexed: run judger view again")
