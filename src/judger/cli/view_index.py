"""The server-side index of a rollouts file for ``judger view``.

The file is read once (by :mod:`judger.trainer.io`, as ``judger score`` reads it), scored if it has no
rewards, summarised by the code ``judger score`` prints with, and then reduced to columns: numpy
arrays for what the table filters and sorts on, Arrow string arrays for the texts searched, and
the byte offset (JSONL) or row position (Parquet) of each row, so that one sample's full row is read
back from the file when it is opened. The states themselves are dropped once indexed. An index is
saved as an Arrow file (and its line offsets as a numpy one) and read back memory-mapped
(:meth:`RolloutIndex.save`, :meth:`RolloutIndex.load`): a worker process builds it, the server maps it.
"""

from __future__ import annotations

import gc
import hashlib
import json
import math
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc
from pydantic import ValidationError

from judger.cli.report import _prompt_text, failure_kind, summarize
from judger.core.rollout import RolloutState, Status
from judger.trainer.io import InputError, RowError, iter_rows, json_default, parse_row
from judger.trainer.metrics import compute_validation_metrics, data_source_name, prompt_key

# the columns of an index, as saved: numbers (numpy arrays) and texts (Arrow string arrays)
NUMERIC_COLUMNS = (
    "row",
    "response_index",
    "source",
    "group",
    "score",
    "verdict",
    "length",
    "prompt_hash",
    "place",
)
TEXT_COLUMNS = ("prompt_text", "response_text", "pred", "reward_json", "reason")

# what a sample's outcome is, as the filters name it
VERDICTS = ("right", "wrong", "failed", "timed_out", "skipped")
RIGHT, WRONG, FAILED, TIMED_OUT, SKIPPED = range(len(VERDICTS))

Scorer = Callable[[list[RolloutState]], None]
# told how far the indexing is: the phase ("reading", "scoring", "summarising") and a count in it
Progress = Callable[[str, int], None]
PROGRESS_ROWS = 5000


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def verdict_of(state: RolloutState) -> int:
    """Right when ``acc`` (else ``score``) is above 0; failed / timed out / skipped as the report counts."""
    kind = failure_kind(state)
    if kind is not None:
        return TIMED_OUT if kind == "timeout" else FAILED
    if state.reward is None:
        return SKIPPED
    acc = _number(state.reward.get("acc"))
    value = acc if acc is not None else _number(state.reward.get("score"))
    return RIGHT if value is not None and value > 0 else WRONG


def restore_outcome(state: RolloutState, row: dict[str, Any]) -> None:
    """Put back what ``judger score -o`` / ``judger eval -o`` wrote on a verl row: its reward, and a
    judging failure (which :func:`parse_row` reads as a sample to judge again)."""
    reward = row.get("reward")
    if isinstance(reward, str) and reward.startswith("{"):
        try:
            reward = json.loads(reward)
        except json.JSONDecodeError:
            reward = None
    failure = row.get("judge_failure")
    if isinstance(failure, str) and failure.startswith("{"):
        try:
            failure = json.loads(failure)
        except json.JSONDecodeError:
            failure = None
    if isinstance(reward, dict):
        state.reward = reward
    elif row.get("status") == Status.FAILED.value and isinstance(failure, dict):
        state.status = Status.FAILED
        state.error_msg = row.get("error_msg") or "judging failed"
        state.extra_fields["judge_failure"] = failure


def states_of_row(row: Any, number: int, *, restore: bool = True) -> list[RolloutState]:
    """The states of one row, with their stored outcomes unless ``restore`` is False (then exactly
    as ``judger score`` reads them); ValueError/ValidationError as parse_row."""
    states, layout = parse_row(row, number, decoded=True)
    if restore and layout == "verl" and isinstance(row, dict):
        for state in states:
            restore_outcome(state, row)
    return states


@dataclass
class ReadResult:
    states: list[RolloutState] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    errors: list[RowError] = field(default_factory=list)
    truncated: bool = False


def read_with_outcomes(
    path: Path, *, restore: bool = True, max_rows: int | None = None, progress: Progress | None = None
) -> ReadResult:
    """Every row's states (stored rewards kept when ``restore``), their row numbers, and the rows
    that failed; only the first ``max_rows`` rows when given (``truncated`` says if more were left)."""
    out = ReadResult()
    try:
        for number, row in iter_rows(path):
            if max_rows is not None and number > max_rows:
                out.truncated = True
                break
            if progress is not None and number % PROGRESS_ROWS == 0:
                progress("reading", number)
            if isinstance(row, RowError):
                out.errors.append(row)
                continue
            try:
                states = states_of_row(row, number, restore=restore)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or "row"
                out.errors.append(RowError(number, f"invalid RolloutState: {where}: {first['msg']}"))
                continue
            except (ValueError, TypeError) as exc:
                out.errors.append(RowError(number, str(exc)))
                continue
            out.states.extend(states)
            out.rows.extend([number] * len(states))
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc})") from exc
    return out


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


def prompt_hash(source: str, prompt: str) -> int:
    """A 64-bit hash of a prompt and its data_source, the same in every process (``hash`` of a str is
    salted per process, and two files may be indexed by two processes)."""
    text = f"{source}\x00{prompt}".encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little", signed=True)


def _json_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=json_default)


class RolloutIndex:
    """One rollouts file as columns; see the module docstring."""

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
        ``progress`` is told each phase as it starts, and the rows read every few thousand.
        ``spill`` False keeps the texts in memory, as they are: for an index saved at once, or a
        preview (see :meth:`_spill_texts`).
        """
        import time

        self.path = Path(path)
        if not self.path.exists():
            raise InputError(f"{self.path}: no such file")
        if self.path.is_dir():
            raise InputError(f"{self.path}: is a directory, not a rollouts file")
        self.parquet = self.path.suffix.lower() in (".parquet", ".pq")
        # scoring again reads the rows as `judger score` does: stored rewards and failures dropped
        with _gc_paused():
            read = read_with_outcomes(self.path, restore=not rescore, max_rows=max_rows, progress=progress)
        self.partial = read.truncated
        states, self.errors = read.states, read.errors
        to_judge = [s for s in states if s.status == Status.COMPLETED and s.reward is None]
        self.scored = 0
        elapsed = 0.0
        if to_judge and scorer is not None:
            if progress is not None:
                progress("scoring", len(to_judge))
            start = time.perf_counter()
            scorer(to_judge)
            elapsed = time.perf_counter() - start
            self.scored = len(to_judge)
        if progress is not None:
            progress("summarising", len(states))
        summary = summarize(states, elapsed, compute_validation_metrics(states), bad_rows=self.errors)
        # the same object `judger score --format json` prints for this file
        self.summary: dict[str, Any] = {"input": str(path), **summary}
        if self.errors:
            self.summary["bad_row_errors"] = [{"row": e.row, "message": e.message} for e in self.errors]
        with _gc_paused():
            self._columns(states, read.rows)
        del states, read, to_judge
        self.offsets = None if self.parquet else line_offsets(self.path, max_rows)
        if spill and max_rows is None:  # a preview is small and short-lived: kept as it is
            self._spill_texts()
            _release_memory()
        self._row_groups: np.ndarray | None = None

    # --- kept on disk ------------------------------------------------------------------------------

    def save(self, stem: Path) -> None:
        """Write the index next to ``stem`` (``.arrow``: the columns; ``.npy``: the line offsets;
        ``.json``: the rest, written last, so a half-written index is never read back)."""
        table = pa.table(
            {
                **{name: pa.array(getattr(self, name)) for name in NUMERIC_COLUMNS},
                **{name: getattr(self, name) for name in TEXT_COLUMNS},
                "status": self.status,
            }
        )
        part = f".{os.getpid()}.part"
        arrow, offsets, meta = (stem.with_suffix(s) for s in (".arrow", ".npy", ".json"))
        with pa.OSFile(str(arrow) + part, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        os.replace(str(arrow) + part, arrow)
        if self.offsets is not None:
            with open(str(offsets) + part, "wb") as fh:
                np.save(fh, self.offsets)
            os.replace(str(offsets) + part, offsets)
        facts = {
            "path": str(self.path),
            "parquet": self.parquet,
            "partial": self.partial,
            "sources": self.sources,
            "n_groups": self.n_groups,
            "scored": self.scored,
            "summary": self.summary,
            "errors": [[e.row, e.message] for e in self.errors],
        }
        Path(str(meta) + part).write_text(json.dumps(facts, default=json_default))
        os.replace(str(meta) + part, meta)

    @classmethod
    def load(cls, stem: Path) -> RolloutIndex:
        """The index :meth:`save` wrote at ``stem``: its columns memory-mapped, not read into memory."""
        facts = json.loads(stem.with_suffix(".json").read_text())
        table = pa.ipc.open_file(pa.memory_map(str(stem.with_suffix(".arrow")), "r")).read_all()
        self = cls.__new__(cls)
        self.path = Path(facts["path"])
        self.parquet, self.partial = facts["parquet"], facts["partial"]
        self.sources, self.n_groups, self.scored = facts["sources"], facts["n_groups"], facts["scored"]
        self.summary = facts["summary"]
        self.errors = [RowError(row, message) for row, message in facts["errors"]]
        self.n = table.num_rows
        for name in (*NUMERIC_COLUMNS, *TEXT_COLUMNS, "status"):
            column = table.column(name)
            array = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
            setattr(self, name, array.to_numpy(zero_copy_only=False) if name in NUMERIC_COLUMNS else array)
        self.offsets = None if self.parquet else np.load(stem.with_suffix(".npy"), mmap_mode="r")
        self._row_groups = None
        return self

    def _columns(self, states: Sequence[RolloutState], rows: Sequence[int]) -> None:
        n = len(states)
        self.n = n
        self.row = np.asarray(rows, dtype=np.int64)
        self.response_index = np.array(
            [int(s.extra_fields.get("response_index", 0)) for s in states], dtype=np.int32
        )
        names: dict[str, int] = {}
        self.source = np.array(
            [names.setdefault(data_source_name(s.data_source), len(names)) for s in states], dtype=np.int32
        )
        self.sources = list(names)
        groups: dict[Any, int] = {}
        self.group = np.array(
            [groups.setdefault((self.source[i], prompt_key(s)), len(groups)) for i, s in enumerate(states)],
            dtype=np.int64,
        )
        self.n_groups = len(groups)
        self.score = np.array(
            [
                (v if s.reward and (v := _number(s.reward.get("score"))) is not None else np.nan)
                for s in states
            ],
            dtype=np.float64,
        )
        self.verdict = np.array([verdict_of(s) for s in states], dtype=np.int8)
        self.length = np.array([len(s.response or "") for s in states], dtype=np.int64)
        prompts = [_prompt_text(s) for s in states]
        self.prompt_text = pa.array(prompts, type=pa.large_string())
        self.response_text = pa.array([s.response or "" for s in states], type=pa.large_string())
        self.pred = pa.array(
            [_json_text((s.reward or {}).get("pred")) for s in states], type=pa.large_string()
        )
        self.reward_json = pa.array([_json_text(s.reward) for s in states], type=pa.large_string())
        self.reason = pa.array(
            [s.error_msg if s.status == Status.FAILED else None for s in states], type=pa.large_string()
        )
        self.status = pa.array([s.status.value for s in states]).dictionary_encode()
        # the key that pairs a sample with the same one in another file: a hash of its data_source and
        # prompt (numbers: keeping the prompt strings read with the states would pin their memory),
        # then its place among that prompt's samples
        seen: dict[int, int] = {}
        hashes = np.empty(n, dtype=np.int64)
        place = np.empty(n, dtype=np.int64)
        for i in range(n):
            h = prompt_hash(self.sources[self.source[i]], prompts[i])
            hashes[i] = h
            place[i] = seen.get(h, 0)
            seen[h] = int(place[i]) + 1
        self.prompt_hash, self.place = hashes, place

    def _spill_texts(self) -> None:
        """Move the text columns to a memory-mapped temporary Arrow file.

        They are what the search scans, about the size of the file: mapped, they sit in the page
        cache, which the system can reclaim, instead of in the server's own memory. The file is
        unlinked at once (the mapping keeps it until the server exits), so nothing is left behind.
        """
        names = TEXT_COLUMNS
        table = pa.table({name: getattr(self, name) for name in names})
        fd, spill = tempfile.mkstemp(prefix="judger-view-", suffix=".arrow")
        os.close(fd)
        try:
            with pa.OSFile(spill, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
                writer.write_table(table)
            mapped = pa.ipc.open_file(pa.memory_map(spill, "r")).read_all()
        finally:
            os.unlink(spill)
        for name in names:
            column = mapped.column(name)
            setattr(self, name, column.chunk(0) if column.num_chunks == 1 else column.combine_chunks())

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
            "pred": self.pred[i].as_py(),
            "length": int(self.length[i]),
            "prompt": _cut(self.prompt_text[i].as_py(), 300),
            "response": _cut(self.response_text[i].as_py(), 300, tail=True),
            "reason": self.reason[i].as_py(),
        }

    def detail(self, i: int) -> dict[str, Any]:
        """Everything about sample ``i``: its row read back from the file, with its reward."""
        number = int(self.row[i])
        state = states_of_row(self.raw_row(number), number)[int(self.response_index[i])]
        reward = self.reward_json[i].as_py()
        return {
            **self.item(i),
            "messages": state.message,
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
