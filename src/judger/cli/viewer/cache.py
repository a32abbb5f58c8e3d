"""Where ``judger view`` keeps the indexes it built, so that a file opened again opens at once.

An index is keyed by the file (its :class:`~judger.cli.viewer.identity.Identity`: resolved path,
device and inode, size, mtime and ctime), by what decides the rewards given on the way in (the
config, preset or compat mode, and whether every sample is scored again) and by the judger version;
any change to one of them is another key, so a changed file or config is indexed again, never shown
from a stale index. An index found is used only if the file's content still has the fingerprint it
was built from (what a rewrite within the clock's tick leaves in the key). Only the most recently
used indexes are kept.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from judger.cli.viewer.identity import Identity
from judger.cli.viewer.index import RolloutIndex

# what a saved index holds changes with this: an older one is then never read back
FORMAT = 2
KEEP = 16


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "judger" / "view"


def scoring_key(config: str | None, preset: str | None, compat: str | None, rescore: bool) -> str:
    """What decides the rewards given on the way in; a config file stands for its contents."""
    content = ""
    for candidate in (config, (config or "").rpartition(":")[0]):
        if candidate and Path(candidate).is_file():
            content = hashlib.sha256(Path(candidate).read_bytes()).hexdigest()
            break
    return json.dumps([config, content, preset, compat, rescore])


class IndexCache:
    """A folder of saved indexes (see the module docstring)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @classmethod
    def open(cls, directory: Path | None) -> tuple[IndexCache, str | None]:
        """The cache in ``directory`` (made if missing); where it cannot be written, a temporary
        folder removed at exit, with the reason to tell the user."""
        directory = directory or default_cache_dir()
        try:
            directory.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=directory, prefix=".probe-"):
                pass
            return cls(directory), None
        except OSError as exc:
            return cls.temporary(), f"cannot keep indexes in {directory} ({exc}): kept until exit only"

    @classmethod
    def temporary(cls) -> IndexCache:
        """A cache that lasts as long as this process (indexes still go through files: a worker
        process builds them, and the server maps them)."""
        directory = Path(tempfile.mkdtemp(prefix="judger-view-"))
        atexit.register(shutil.rmtree, directory, ignore_errors=True)
        return cls(directory)

    def stem(self, path: Path, scoring: str) -> Path:
        """Where the index of ``path`` scored as ``scoring`` is kept (without its suffixes)."""
        from judger import __version__

        key = json.dumps([FORMAT, __version__, Identity.of(path).as_dict(), scoring])
        return self.directory / hashlib.sha256(key.encode()).hexdigest()[:32]

    def load(self, stem: Path) -> RolloutIndex | None:
        """The index kept at ``stem``, or None when there is none, it cannot be read, or the file no
        longer holds what it was built from (then it is built again)."""
        meta = stem.with_suffix(".json")
        if not meta.is_file():
            return None
        try:
            index = RolloutIndex.load(stem)
        except (OSError, ValueError, KeyError, TypeError, pa.ArrowException):
            return None
        if not index.snapshot.still():
            return None
        os.utime(meta)  # most recently used: the last one pruned
        return index

    def prune(self, keep: int = KEEP) -> None:
        """Remove all but the ``keep`` most recently used indexes (a mapped one stays readable to the
        server that maps it: the system frees it when unmapped)."""
        metas = sorted(self.directory.glob("*.json"), key=_mtime, reverse=True)
        for meta in metas[keep:]:
            for suffix in (".json", ".arrow", ".npy"):
                meta.with_suffix(suffix).unlink(missing_ok=True)
        # what a killed worker left half-written
        stale = time.time() - 24 * 3600
        for part in self.directory.glob("*.part"):
            if _mtime(part) < stale:
                part.unlink(missing_ok=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # removed meanwhile, by another judger view
        return 0.0
