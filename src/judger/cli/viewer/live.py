"""A file's index while ``judger view`` builds it: the page is served from the first rows at once,
and from the whole file once it is indexed.

:func:`index_in_background` runs in a thread per file: an index kept in the cache is read back
(memory-mapped) and is complete at once; otherwise the first rows are indexed (a preview), then
the whole file is (by a :data:`Builder`: a worker process in the CLI, so that the server's thread
stays free to answer and its memory never holds the file's states), and the index kept. Every
phase is reported, so the page says what it waits for; a failure is shown, never
a page that stays partial without a word.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judger.cli.viewer.cache import IndexCache
from judger.cli.viewer.identity import CHANGED, GROWN, SAME
from judger.cli.viewer.index import SKIPPED, Progress, RolloutIndex, Scorer, build_kept
from judger.core.errors import JudgerError
from judger.trainer.io import InputError

# rows indexed for the first page: few enough to be read by the time the page asks for them
PREVIEW_ROWS = 1000

# builds the whole index of a file: given where to keep it (or None) and whom to tell how far it is
Builder = Callable[[Path | None, Progress], RolloutIndex]


class IndexUnavailable(JudgerError):
    """No index of the file to answer from: still starting, or its indexing failed."""


class LiveIndex:
    """The index the server answers from for one file (see the module docstring)."""

    def __init__(self, path: str | Path, index: RolloutIndex | None = None) -> None:
        self.path = Path(path)
        self._index = index
        self.complete = index is not None
        self.cached = False
        self.error: str | None = None
        self.phase = "complete" if index is not None else "starting"
        self.count = 0
        self.done = 0
        self.started = time.monotonic()
        self._changed = threading.Condition()

    def current(self, timeout: float = 30.0) -> RolloutIndex:
        """The latest index (the preview until the whole file is indexed); waits for the first."""
        with self._changed:
            self._changed.wait_for(lambda: self._index is not None or self.error is not None, timeout)
            if self._index is None:
                raise IndexUnavailable(self.error or f"{self.path}: still reading the first rows")
            return self._index

    def peek(self) -> RolloutIndex | None:
        """The latest index, or None before the first rows are indexed (never waits)."""
        return self._index

    def publish(self, index: RolloutIndex, *, complete: bool, cached: bool = False) -> None:
        with self._changed:
            if self.complete and not complete:  # a preview never replaces the whole file
                return
            self._index, self.complete, self.cached = index, complete, cached
            if complete:
                self.phase = "complete"
            self._changed.notify_all()

    def fail(self, message: str) -> None:
        with self._changed:
            self.error, self.phase = message, "failed"
            self._changed.notify_all()

    def report(self, phase: str, count: int) -> None:
        """A :data:`Progress`: ``count`` is the rows read (``"reading"``) or the samples summarised
        (``"summarising"``); ``("scored", k)`` adds k samples scored; ``"scoring"`` (a chunk's
        samples) changes only the phase."""
        if phase == "scored":
            self.done += count
        elif phase == "scoring":
            self.phase = phase
        else:
            self.phase, self.count = phase, count

    def wait(self, timeout: float | None = None) -> bool:
        """Until the whole file is indexed (True) or its indexing failed (False)."""
        with self._changed:
            self._changed.wait_for(lambda: self.complete or self.error is not None, timeout)
            return self.complete

    def status(self) -> dict[str, Any]:
        """What the page shows of the indexing: its phase, its count and the samples shown so far."""
        index = self._index
        state = index.file_state() if index is not None else SAME
        return {
            "path": str(self.path),
            "complete": self.complete,
            "cached": self.cached,
            "phase": self.phase,
            "count": self.count,
            "done": self.done,
            "elapsed_s": round(time.monotonic() - self.started, 1),
            "error": self.error,
            "samples": index.n if index is not None else 0,
            "groups": index.n_groups if index is not None else 0,
            "scored_on_load": index.scored if index is not None else 0,
            # the file was written or replaced since (its rows no longer match what is shown), or
            # rows were appended to it (those shown are still there)
            "changed": state == CHANGED,
            "grown": state == GROWN,
        }


@dataclass
class IndexJob:
    """How one file is indexed: ``build`` makes its whole index; ``cache`` keeps it under ``scoring``."""

    path: Path
    build: Builder
    rescore: bool = False
    cache: IndexCache | None = None
    scoring: str = ""
    preview_rows: int = PREVIEW_ROWS


def in_process(path: Path, scorer: Scorer | None, rescore: bool) -> Builder:
    """A :data:`Builder` that indexes in this process (tests; or where no worker may be started)."""

    def build(stem: Path | None, progress: Progress) -> RolloutIndex:
        if stem is None:
            return RolloutIndex(path, scorer=scorer, rescore=rescore, progress=progress)
        build_kept(path, stem, scorer=scorer, rescore=rescore, progress=progress)
        return RolloutIndex.load(stem)

    return build


def index_file(live: LiveIndex, job: IndexJob) -> None:
    """Index ``job.path`` into ``live``: from the cache, else a preview and then the whole file."""
    try:
        stem = job.cache.stem(job.path, job.scoring) if job.cache is not None else None
        kept = job.cache.load(stem) if job.cache is not None and stem is not None else None
        if kept is not None:
            live.publish(kept, complete=True, cached=True)
            return
        live.report("reading", 0)
        preview = RolloutIndex(job.path, scorer=None, rescore=job.rescore, max_rows=job.preview_rows)
        # the first rows were the whole file, and nothing in it waits for a score: that is the index
        whole = not preview.partial and not (preview.verdict == SKIPPED).any()
        live.publish(preview, complete=whole and stem is None)
        if whole and stem is not None:
            preview.save(stem)
            live.publish(RolloutIndex.load(stem), complete=True)
        elif not whole:
            live.report("whole", 0)
            live.publish(job.build(stem, live.report), complete=True)
        if job.cache is not None:
            job.cache.prune()
    except InputError as exc:
        live.fail(str(exc))
    except Exception as exc:  # a scoring that stopped, a bug in a custom judger: shown, not swallowed
        live.fail(f"{job.path}: indexing stopped: {type(exc).__name__}: {exc}")


def index_in_background(live: LiveIndex, job: IndexJob) -> threading.Thread:
    thread = threading.Thread(target=index_file, args=(live, job), name=f"index {job.path}", daemon=True)
    thread.start()
    return thread
