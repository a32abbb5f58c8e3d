"""The server-side index of a rollouts file for ``judger view``.

The file is read (by :mod:`judger.trainer.io`, as ``judger score`` reads it), scored where it has no
rewards, summarised by the code ``judger score`` prints with, and reduced to columns, chunk by chunk
(:mod:`judger.cli.viewer.columns`): numbers for what the table filters and sorts on, Arrow string
arrays for the texts searched, and the byte offset (JSONL) or row position (Parquet) of each row,
so that one sample's full row is read back from the file when it is opened. An index is kept as an
Arrow file (its line offsets as a numpy one) and read back memory-mapped (:meth:`RolloutIndex.load`):
a worker process builds it (:func:`build_kept`), the server maps it.
"""

from __future__ import annotations

import gc
import json
import math
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc

from judger.cli.report import _prompt_text
from judger.cli.viewer.columns import (
    FAILED,
    NUMERIC_COLUMNS,
    RIGHT,
    SCHEMA,
    SKIPPED,
    TEXT_COLUMNS,
    TIMED_OUT,
    VERDICTS,
    WRONG,
    Built,
    Progress,
    ReadResult,
    Scorer,
    _json_text,
    build,
    prompt_hash,
    read_with_outcomes,
    restore_outcome,
    states_of_row,
    verdict_of,
)
from judger.cli.viewer.identity import CHANGED, FileChanged, Snapshot, changed_message
from judger.core.rollout import RolloutState
from judger.trainer.io import InputError, RowError, json_default

__all__ = [
    "FAILED",
    "RIGHT",
    "SKIPPED",
    "TIMED_OUT",
    "VERDICTS",
    "WRONG",
    "Progress",
    "ReadResult",
    "RolloutIndex",
    "Scorer",
    "_json_text",
    "build_kept",
    "diff",
    "line_offsets",
    "plot_data",
    "prompt_hash",
    "read_with_outcomes",
    "restore_outcome",
    "states_of_row",
    "verdict_of",
]


def line_offsets(path: Path, max_lines: int | None = None) -> np.ndarray:
    """The byte offset of the start of each line (line N starts at ``offsets[N - 1]``); those of the
    first ``max_lines`` lines at least when given (the rest of the file is then not read)."""
    starts = [np.zeros(1, dtype=np.int64)]
    base = found = 0
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 24 if max_lines is None else 1 << 20):
            newlines = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10)
            starts.append(newlines.astype(np.int64) + base + 1)
            base += len(chunk)
            found += len(newlines)
            if max_lines is not None and found >= max_lines:
                break
    return np.concatenate(starts)


def _checked(path: str | Path) -> Path:
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path}: is a directory, not a rollouts file")
    return path


def _is_parquet(path: Path) -> bool:
    return path.suffix.lower() in (".parquet", ".pq")


def _part(path: Path) -> str:
    """Where ``path`` is written before it is renamed into place (never read half-written)."""
    return f"{path}.{os.getpid()}.part"


def _write_facts(stem: Path, facts: dict[str, Any], offsets: np.ndarray | None) -> None:
    """The line offsets and the facts of an index kept at ``stem``; the facts last: once they are
    there, the index is whole."""
    if offsets is not None:
        target = stem.with_suffix(".npy")
        with open(_part(target), "wb") as fh:
            np.save(fh, offsets)
        os.replace(_part(target), target)
    meta = stem.with_suffix(".json")
    Path(_part(meta)).write_text(json.dumps(facts, default=json_default))
    os.replace(_part(meta), meta)


def _facts(path: Path, snapshot: Snapshot, built: Built) -> dict[str, Any]:
    return {
        # the resolved path: the index is read back from another folder too
        "path": snapshot.identity.path,
        **snapshot.as_facts(),
        "parquet": _is_parquet(path),
        "partial": built.partial,
        "sources": built.sources,
        "n_groups": built.n_groups,
        "scored": built.scored,
        "summary": built.summary,
        "errors": [[e.row, e.message] for e in built.errors],
    }


def build_kept(
    path: str | Path,
    stem: Path,
    *,
    scorer: Scorer | None = None,
    rescore: bool = False,
    progress: Progress | None = None,
) -> None:
    """Index the whole of ``path`` into files at ``stem`` (read back by :meth:`RolloutIndex.load`),
    each chunk's columns written as they are made: the build holds one chunk's states at a time."""
    path = _checked(path)
    snapshot = Snapshot.of(path)
    arrow = stem.with_suffix(".arrow")
    with pa.OSFile(_part(arrow), "wb") as sink, pa.ipc.new_file(sink, SCHEMA) as writer, _gc_paused():
        built = build(path, writer.write_batch, scorer=scorer, rescore=rescore, progress=progress)
    offsets = None if _is_parquet(path) else line_offsets(path)
    snapshot.after_reading(path)
    os.replace(_part(arrow), arrow)
    _write_facts(stem, _facts(path, snapshot, built), offsets)


class RolloutIndex:
    """One rollouts file as columns; see the module docstring."""

    path: Path
    snapshot: Snapshot  # the file's content the index was built from
    parquet: bool
    partial: bool
    n: int
    sources: list[str]
    n_groups: int
    scored: int
    summary: dict[str, Any]
    errors: list[RowError]
    offsets: np.ndarray | None
    # the columns (columns.NUMERIC_COLUMNS, TEXT_COLUMNS): numpy arrays; Arrow arrays of text
    row: np.ndarray
    response_index: np.ndarray
    source: np.ndarray
    group: np.ndarray
    score: np.ndarray
    verdict: np.ndarray
    length: np.ndarray
    prompt_hash: np.ndarray
    place: np.ndarray
    truncated: np.ndarray
    prompt_text: Any
    response_text: Any
    pred: Any
    reward_json: Any
    reason: Any
    status: Any
    finish: Any

    def __init__(
        self,
        path: str | Path,
        *,
        scorer: Scorer | None = None,
        rescore: bool = False,
        max_rows: int | None = None,
        progress: Progress | None = None,
        spill: bool = True,
    ) -> None:
        """Read ``path``; samples with no reward (all of them when ``rescore``) go to ``scorer``.

        ``scorer`` is None when nothing may be scored: then samples without a reward stay skipped.
        With ``max_rows``, only the first rows are read: ``partial`` then says if the file has more.
        ``progress`` is told each phase as it starts, and the rows read every chunk. ``spill`` False
        keeps the texts in memory as they are (see :func:`_spilled`); a preview is never spilled.
        """
        self.path = _checked(path)
        snapshot = Snapshot.of(self.path)
        batches: list[pa.RecordBatch] = []
        with _gc_paused():
            built = build(
                self.path,
                batches.append,
                scorer=scorer,
                rescore=rescore,
                max_rows=max_rows,
                progress=progress,
            )
        table = pa.Table.from_batches(batches, schema=SCHEMA)
        del batches
        spill = spill and max_rows is None
        if spill:
            table = _spilled(table)
        self._take(_facts(self.path, snapshot, built), table)
        self.path = Path(snapshot.identity.path)  # rows are read back from the file indexed
        self.offsets = None if self.parquet else line_offsets(self.path, max_rows)
        snapshot.after_reading(self.path)
        if spill:
            _release_memory()

    def _take(self, facts: dict[str, Any], table: pa.Table) -> None:
        """Hold ``table``'s columns: numbers as numpy arrays, texts as they are (Arrow, maybe mapped)."""
        self.snapshot = Snapshot.from_facts(facts)
        self.parquet, self.partial = facts["parquet"], facts["partial"]
        self.sources, self.n_groups, self.scored = facts["sources"], facts["n_groups"], facts["scored"]
        self.summary = facts["summary"]
        self.errors = [RowError(row, message) for row, message in facts["errors"]]
        self.n = table.num_rows
        for name, kind in NUMERIC_COLUMNS.items():
            setattr(self, name, _numbers(table.column(name), kind))
        for name in TEXT_COLUMNS:
            column = table.column(name)
            setattr(self, name, column.chunk(0) if column.num_chunks == 1 else column)
        self._row_groups: np.ndarray | None = None

    # --- kept on disk ------------------------------------------------------------------------------

    def save(self, stem: Path) -> None:
        """Write the index at ``stem`` (``.arrow``: the columns; ``.npy``: the line offsets; ``.json``:
        the rest, written last, so a half-written index is never read back)."""
        table = pa.table(
            {
                **{name: pa.array(getattr(self, name), type=kind) for name, kind in NUMERIC_COLUMNS.items()},
                **{name: getattr(self, name) for name in TEXT_COLUMNS},
            },
            schema=SCHEMA,
        )
        arrow = stem.with_suffix(".arrow")
        with pa.OSFile(_part(arrow), "wb") as sink, pa.ipc.new_file(sink, SCHEMA) as writer:
            writer.write_table(table)
        os.replace(_part(arrow), arrow)
        facts = {
            "path": self.snapshot.identity.path,
            **self.snapshot.as_facts(),
            "parquet": self.parquet,
            "partial": self.partial,
            "sources": self.sources,
            "n_groups": self.n_groups,
            "scored": self.scored,
            "summary": self.summary,
            "errors": [[e.row, e.message] for e in self.errors],
        }
        _write_facts(stem, facts, self.offsets)

    @classmethod
    def load(cls, stem: Path) -> RolloutIndex:
        """The index kept at ``stem``: its texts memory-mapped, not read into memory."""
        facts = json.loads(stem.with_suffix(".json").read_text())
        table = pa.ipc.open_file(pa.memory_map(str(stem.with_suffix(".arrow")), "r")).read_all()
        if not table.schema.equals(SCHEMA):
            raise ValueError(f"{stem}: the columns of another version of judger view")
        self = cls.__new__(cls)
        self.path = Path(facts["path"])  # resolved: the file indexed, from whatever folder
        self._take(facts, table)
        self.offsets = None if self.parquet else np.load(stem.with_suffix(".npy"), mmap_mode="r")
        return self

    def source_name(self, i: int) -> str:
        return self.sources[self.source[i]]

    # --- reading one sample back -------------------------------------------------------------------

    def _parquet_row(self, number: int) -> dict[str, Any]:
        parquet = _parquet_file(str(self.path))
        if self._row_groups is None:
            sizes = [parquet.metadata.row_group(g).num_rows for g in range(parquet.num_row_groups)]
            self._row_groups = np.cumsum([0, *sizes])
        group = int(np.searchsorted(self._row_groups, number - 1, side="right") - 1)
        table = _row_group(str(self.path), group)
        row: dict[str, Any] = table.slice(number - 1 - int(self._row_groups[group]), 1).to_pylist()[0]
        return row

    def raw_row(self, number: int) -> dict[str, Any]:
        """Row ``number`` (from 1) of the file, decoded."""
        if self.parquet:
            return self._parquet_row(number)
        assert self.offsets is not None
        with self.path.open("rb") as fh:
            fh.seek(int(self.offsets[number - 1]))
            value: dict[str, Any] = json.loads(fh.readline().decode("utf-8", errors="replace"))
            return value

    def item(self, i: int) -> dict[str, Any]:
        """The table's fields of sample ``i`` (texts cut short)."""
        reward = self.reward_json[i].as_py()
        return {
            "id": int(i),
            "row": int(self.row[i]),
            "response_index": int(self.response_index[i]),
            "data_source": self.sources[self.source[i]],
            "group": int(self.group[i]),
            "score": None if math.isnan(self.score[i]) else float(self.score[i]),
            "acc": (json.loads(reward) or {}).get("acc") if reward else None,
            "verdict": VERDICTS[self.verdict[i]],
            "pred": None if (pred := self.pred[i].as_py()) is None else _cut(pred, 300),
            "length": int(self.length[i]),
            "prompt": _cut(self.prompt_text[i].as_py(), 300),
            "response": _cut(self.response_text[i].as_py(), 300, tail=True),
            "reason": self.reason[i].as_py(),
            "finish": self.finish[i].as_py(),
            "truncated": bool(self.truncated[i]),
        }

    def file_state(self) -> str:
        """How the file stands against what was indexed: identity.s SAME, GROWN (rows
        appended: those indexed are still there) or CHANGED (another file at the path, or written)."""
        return self.snapshot.state()

    def read_back(self, i: int) -> RolloutState:
        """Sample ``i`` as its row in the file holds it; :class:`FileChanged` if the file changed
        since it was indexed (told by its identity, or by a row that is not the one indexed: a
        rewrite within the clock's tick), never another row's text beside this one's verdict."""
        if self.file_state() == CHANGED:
            raise FileChanged(changed_message(self.path))
        number = int(self.row[i])
        try:
            state = states_of_row(self.raw_row(number), number)[int(self.response_index[i])]
        except (ValueError, TypeError, IndexError) as exc:  # it was read when indexed
            raise FileChanged(changed_message(self.path)) from exc
        if (state.response or "") != self.response_text[i].as_py() or _prompt_text(state) != self.prompt_text[
            i
        ].as_py():
            raise FileChanged(changed_message(self.path))
        return state

    def detail(self, i: int) -> dict[str, Any]:
        """Everything about sample ``i``: its row read back from the file, with its reward."""
        state = self.read_back(i)
        reward = self.reward_json[i].as_py()
        return {
            **self.item(i),
            "messages": state.message,
            "pred": self.pred[i].as_py(),
            "response": state.response or "",
            "ground_truth": state.ground_truth,
            "reward": json.loads(reward) if reward else None,
            "status": self.status[i].as_py(),
            "extra_info": state.extra_fields.get("extra_info"),
        }

    # --- queries -----------------------------------------------------------------------------------

    def mask(
        self,
        *,
        source: str | None = None,
        verdict: str | None = None,
        min_score: float | None = None,
        max_score: float | None = None,
        query: str | None = None,
    ) -> np.ndarray:
        """The samples that pass every filter given."""
        keep = np.ones(self.n, dtype=bool)
        if source:
            code = self.sources.index(source) if source in self.sources else -1
            keep &= self.source == code
        if verdict:
            keep &= self.verdict == VERDICTS.index(verdict)
        if min_score is not None:
            keep &= self.score >= min_score
        if max_score is not None:
            keep &= self.score <= max_score
        if query:
            import pyarrow.compute as pc  # here: its import is a noticeable part of the start-up

            hit = pc.or_(
                pc.match_substring(self.prompt_text, query, ignore_case=True),
                pc.match_substring(self.response_text, query, ignore_case=True),
            )
            keep &= hit.to_numpy(zero_copy_only=False)
        return keep

    def order(self, selected: np.ndarray, sort: str) -> np.ndarray:
        """``selected`` (indices) sorted by ``row``, ``score`` or ``length`` (``-`` first: descending)."""
        key = sort.lstrip("-")
        columns = {"row": self.row, "score": self.score, "length": self.length, "group": self.group}
        if key not in columns:
            raise ValueError(f"sort must be one of {sorted(columns)} (with - for descending), got {sort!r}")
        values = columns[key][selected]
        if sort.startswith("-"):
            # NaN scores last either way
            values = -np.nan_to_num(values.astype(np.float64), nan=-np.inf)
        idx = np.argsort(values, kind="stable")
        return selected[idx]

    def counts(self, keep: np.ndarray) -> dict[str, int]:
        found = np.bincount(self.verdict[keep], minlength=len(VERDICTS))
        return {name: int(found[i]) for i, name in enumerate(VERDICTS)}

    def group_members(self, i: int) -> np.ndarray:
        members = np.flatnonzero(self.group == self.group[i])
        return members[np.lexsort((self.response_index[members], self.row[members]))]

    def failure_reasons(self, top: int = 10) -> dict[str, list[dict[str, Any]]]:
        """Per data_source, the most frequent failure messages and how many samples each."""
        out: dict[str, list[dict[str, Any]]] = {}
        failed = np.flatnonzero((self.verdict == FAILED) | (self.verdict == TIMED_OUT))
        for name, code in zip(self.sources, range(len(self.sources))):
            picked = failed[self.source[failed] == code]
            if not len(picked):
                continue
            found: dict[str, int] = {}
            for reason in self.reason.take(pa.array(picked)).to_pylist():
                found[reason or "?"] = found.get(reason or "?", 0) + 1
            ranked = sorted(found.items(), key=lambda kv: -kv[1])[:top]
            out[name] = [{"reason": r, "count": c} for r, c in ranked]
        return out

    def plots(self, points: int = 2000) -> dict[str, Any]:
        """Per data_source: a score histogram, pass@k against k, and (length, score) points (a sample)."""
        rng = np.random.default_rng(0)
        out: dict[str, Any] = {}
        for code, name in enumerate(self.sources):
            mine = np.flatnonzero(self.source == code)
            scored = mine[~np.isnan(self.score[mine])]
            shown = np.sort(rng.choice(scored, points, replace=False)) if len(scored) > points else scored
            out[name] = plot_data(
                self.summary, name, self.score[scored], self.length[shown], self.score[shown]
            )
        return out


def plot_data(
    summary: dict[str, Any], name: str, scores: np.ndarray, lengths: np.ndarray, length_scores: np.ndarray
) -> dict[str, Any]:
    """What the page plots for data_source ``name``: the histogram of ``scores`` (every score), pass@k
    against k (from the report's metrics), and response length against score (``lengths`` paired
    with ``length_scores``, a sample)."""
    hist: dict[str, Any] = {"edges": [], "counts": []}
    if len(scores):
        lo, hi = float(scores.min()), float(scores.max())
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        counts, edges = np.histogram(scores, bins=20, range=(lo, hi))
        hist = {"edges": edges.tolist(), "counts": counts.tolist()}
    metrics = summary["data_sources"].get(name, {}).get("metrics", {})
    var = "acc" if "acc" in metrics else "score"
    pass_k = sorted(
        (int(m[len("pass@") :]), v) for m, v in metrics.get(var, {}).items() if m.startswith("pass@")
    )
    return {
        "histogram": hist,
        "pass_at_k": {"k": [k for k, _ in pass_k], "value": [v for _, v in pass_k]},
        "length_vs_score": {
            "length": np.asarray(lengths).tolist(),
            "score": np.asarray(length_scores).tolist(),
        },
    }


@contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic collection while the states are built: they are acyclic and live until indexed."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _release_memory() -> None:
    """Hand the memory of the dropped states back to the system: the server lives on for hours with
    only the columns, and glibc keeps freed small-object heaps mapped unless asked."""
    import ctypes

    gc.collect()
    pa.default_memory_pool().release_unused()  # the text columns' buffers before they were mapped
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the memory is reused by the process, not returned
        pass


def _cut(text: str | None, limit: int, *, tail: bool = False) -> str:
    text = text or ""
    if len(text) <= limit:
        return text
    return "…" + text[-limit:] if tail else text[:limit] + "…"


@lru_cache(maxsize=4)
def _parquet_file(path: str) -> Any:
    import pyarrow.parquet as pq

    return pq.ParquetFile(path)


@lru_cache(maxsize=4)
def _row_group(path: str, group: int) -> pa.Table:
    return _parquet_file(path).read_row_group(group)


def diff(a: RolloutIndex, b: RolloutIndex) -> tuple[np.ndarray, np.ndarray]:
    """The samples (indices in ``a`` and in ``b``) whose verdict differs, paired by data_source,
    prompt and place among that prompt's samples."""
    left = pa.table({"h": a.prompt_hash, "k": a.place, "i": np.arange(a.n, dtype=np.int64)})
    right = pa.table({"h": b.prompt_hash, "k": b.place, "j": np.arange(b.n, dtype=np.int64)})
    joined = left.join(right, keys=["h", "k"], join_type="inner")
    i = joined.column("i").to_numpy()
    j = joined.column("j").to_numpy()
    flipped = a.verdict[i] != b.verdict[j]
    i, j = i[flipped], j[flipped]
    import pyarrow.compute as pc

    # a hash is not proof: the pair is kept only if the two prompts are the same text
    same = pc.equal(a.prompt_text.take(pa.array(i)), b.prompt_text.take(pa.array(j))).to_numpy(
        zero_copy_only=False
    )
    sources_a, sources_b = np.asarray(a.sources, dtype=object), np.asarray(b.sources, dtype=object)
    same &= sources_a[a.source[i]] == sources_b[b.source[j]]
    i, j = i[same], j[same]
    order = np.argsort(i, kind="stable")
    return i[order].astype(np.int64), j[order].astype(np.int64)


def _numbers(column: pa.ChunkedArray, kind: pa.DataType) -> np.ndarray:
    """A column of numbers as one numpy array (a view of it when it is one chunk)."""
    if column.num_chunks == 0:
        return np.empty(0, dtype=kind.to_pandas_dtype())
    if column.num_chunks == 1:
        return column.chunk(0).to_numpy(zero_copy_only=False)
    return np.concatenate([c.to_numpy(zero_copy_only=False) for c in column.chunks])


def _spilled(table: pa.Table) -> pa.Table:
    """``table`` moved to a memory-mapped temporary Arrow file.

    Its texts are what the search scans, about the size of the file: mapped, they sit in the page
    cache, which the system can reclaim, instead of in the server's own memory. The file is unlinked
    at once (the mapping keeps it until the server exits), so nothing is left behind.
    """
    fd, spill = tempfile.mkstemp(prefix="judger-view-", suffix=".arrow")
    os.close(fd)
    try:
        with pa.OSFile(spill, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        return pa.ipc.open_file(pa.memory_map(spill, "r")).read_all()
    finally:
        os.unlink(spill)
