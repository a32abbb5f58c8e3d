"""The index of a rollouts file built chunk by chunk, as ``judger score`` scores one.

Each chunk of rows is read, scored where it needs to be, added to the report's :class:`Tally` (the
summary ``judger score`` prints, from the same code) and reduced to one Arrow record batch of the
index's columns; then its states are dropped. So the memory of a build is a chunk's states plus
numbers per sample, whatever the size of the file: the batches go to a file as they are made when
the index is saved (:class:`RolloutIndex` with ``keep``), or stay as Arrow buffers otherwise.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from pydantic import ValidationError

from judger.cli.report import _prompt_text, failure_kind
from judger.cli.tally import Tally, _group_hash
from judger.core.outputs import finite_number
from judger.core.rollout import RolloutState, Status
from judger.trainer.io import InputError, RowError, iter_rows, json_default, parse_row
from judger.trainer.metrics import data_source_name

# rows read, scored and indexed at a time: what the build holds as states
CHUNK_ROWS = 4096
# told how far the indexing is: the phase ("reading", "scoring", "scored", "summarising") and a count
Progress = Callable[[str, int], None]
# judges a chunk's states in place; called once a chunk, then ``close()`` if it has one
Scorer = Callable[[list[RolloutState]], None]

NUMERIC_COLUMNS = {
    "row": pa.int64(),
    "response_index": pa.int32(),
    "source": pa.int32(),
    "group": pa.int64(),
    "score": pa.float64(),
    "verdict": pa.int8(),
    "length": pa.int64(),
    "prompt_hash": pa.int64(),
    "place": pa.int64(),
    "truncated": pa.bool_(),
}
TEXT_COLUMNS = ("prompt_text", "response_text", "pred", "reward_json", "reason", "status", "finish")
SCHEMA = pa.schema([*NUMERIC_COLUMNS.items(), *((name, pa.large_string()) for name in TEXT_COLUMNS)])

# what a sample's outcome is, as the filters name it
VERDICTS = ("right", "wrong", "failed", "timed_out", "skipped")
RIGHT, WRONG, FAILED, TIMED_OUT, SKIPPED = range(len(VERDICTS))


@dataclass
class ReadResult:
    states: list[RolloutState] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    errors: list[RowError] = field(default_factory=list)
    truncated: bool = False


@dataclass
class Built:
    """What an index holds besides its columns."""

    sources: list[str]
    n_groups: int
    scored: int
    partial: bool
    summary: dict[str, Any]
    errors: list[RowError]  # the first rows' (bad_rows in the summary counts them all)


def _decoded(value: Any) -> Any:
    """A field Parquet or CSV carried as JSON text, decoded (None if that text is not JSON)."""
    if isinstance(value, str) and value.startswith("{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return None
    return value


def restore_outcome(state: RolloutState, row: dict[str, Any]) -> None:
    """Put back what ``judger score -o`` / ``judger eval -o`` wrote on a verl row: its reward, and a
    judging failure (which :func:`parse_row` reads as a sample to judge again)."""
    reward, failure = _decoded(row.get("reward")), _decoded(row.get("judge_failure"))
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


def _add_row(out: ReadResult, number: int, row: Any, restore: bool) -> None:
    if isinstance(row, RowError):
        out.errors.append(row)
        return
    try:
        states = states_of_row(row, number, restore=restore)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "row"
        out.errors.append(RowError(number, f"invalid RolloutState: {where}: {first['msg']}"))
        return
    except (ValueError, TypeError) as exc:
        out.errors.append(RowError(number, str(exc)))
        return
    out.states.extend(states)
    out.rows.extend([number] * len(states))


def read_chunks(
    path: Path,
    *,
    restore: bool = True,
    max_rows: int | None = None,
    progress: Progress | None = None,
    rows: int | None = None,
) -> Iterator[ReadResult]:
    """The file's states (stored rewards kept when ``restore``), their row numbers and the rows that
    failed, ``rows`` rows at a time; only the first ``max_rows`` rows when given (the last chunk's
    ``truncated`` then says if the file has more)."""
    rows = rows or CHUNK_ROWS
    out = ReadResult()
    number = 0
    try:
        for number, row in iter_rows(path):
            if max_rows is not None and number > max_rows:
                out.truncated = True
                break
            _add_row(out, number, row, restore)
            if number % rows == 0:
                if progress is not None:
                    progress("reading", number)
                yield out
                out = ReadResult()
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc})") from exc
    if progress is not None:
        progress("reading", min(number, max_rows) if max_rows is not None else number)
    yield out


def read_with_outcomes(path: Path, *, restore: bool = True) -> ReadResult:
    """Every row's states (stored rewards kept when ``restore``), their row numbers, and the rows
    that failed."""
    whole = ReadResult()
    for chunk in read_chunks(path, restore=restore):
        whole.states.extend(chunk.states)
        whole.rows.extend(chunk.rows)
        whole.errors.extend(chunk.errors)
    return whole


def verdict_of(state: RolloutState) -> int:
    """Right when ``acc`` (else ``score``) is above 0; failed / timed out / skipped as the report counts."""
    kind = failure_kind(state)
    if kind is not None:
        return TIMED_OUT if kind == "timeout" else FAILED
    if state.reward is None:
        return SKIPPED
    acc = finite_number(state.reward.get("acc"))
    value = acc if acc is not None else finite_number(state.reward.get("score"))
    return RIGHT if value is not None and value > 0 else WRONG


def finish_of(state: RolloutState) -> tuple[str | None, bool]:
    """How the sample's generation ended: its ``finish_reason`` (as ``judger eval`` writes it on the
    row, else as the state carries it) and whether it was cut short (the row's ``truncated``, a
    state's ``extra_fields["truncated"]``, or a ``length`` finish)."""
    columns = state.extra_fields.get("columns") or {}
    finish = columns.get("finish_reason", state.finish_reason)
    finish = finish if isinstance(finish, str) else None
    said = columns.get("truncated", state.extra_fields.get("truncated"))
    return finish, said is True or finish == "length"


def _json_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=json_default)


def prompt_hash(source: str, prompt: str) -> int:
    """A 64-bit hash of a prompt and its data_source, the same in every process (``hash`` of a str is
    salted per process, and two files may be indexed by two processes)."""
    import hashlib

    text = f"{source}\x00{prompt}".encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little", signed=True)


class ColumnMaker:
    """The index's columns of one chunk of states after another: the codes of data_sources and
    prompt groups, and each sample's place among its prompt's samples, run on across chunks (kept as
    numbers: holding the prompt strings would keep every chunk's memory)."""

    def __init__(self) -> None:
        self.sources: dict[str, int] = {}
        self.groups: dict[tuple[int, int], int] = {}
        self._seen: dict[int, int] = {}

    def batch(self, states: list[RolloutState], rows: list[int]) -> pa.RecordBatch:
        source = [self.sources.setdefault(data_source_name(s.data_source), len(self.sources)) for s in states]
        names = list(self.sources)
        prompts = [_prompt_text(s) for s in states]
        hashes = [prompt_hash(names[code], prompt) for code, prompt in zip(source, prompts)]
        finishes = [finish_of(s) for s in states]
        place = []
        for h in hashes:
            place.append(self._seen.get(h, 0))
            self._seen[h] = place[-1] + 1
        numbers = {
            "row": rows,
            "response_index": [int(s.extra_fields.get("response_index", 0)) for s in states],
            "source": source,
            "group": [
                self.groups.setdefault((code, _group_hash(s)), len(self.groups))
                for code, s in zip(source, states)
            ],
            "score": [
                (v if s.reward and (v := finite_number(s.reward.get("score"))) is not None else np.nan)
                for s in states
            ],
            "verdict": [verdict_of(s) for s in states],
            "length": [len(s.response or "") for s in states],
            "prompt_hash": hashes,
            "place": place,
            "truncated": [cut for _, cut in finishes],
        }
        texts = {
            "prompt_text": prompts,
            "response_text": [s.response or "" for s in states],
            "pred": [_json_text((s.reward or {}).get("pred")) for s in states],
            "reward_json": [_json_text(s.reward) for s in states],
            "reason": [s.error_msg if s.status == Status.FAILED else None for s in states],
            "status": [s.status.value for s in states],
            "finish": [finish for finish, _ in finishes],
        }
        arrays = [pa.array(numbers[name], type=kind) for name, kind in NUMERIC_COLUMNS.items()]
        arrays += [pa.array(texts[name], type=pa.large_string()) for name in TEXT_COLUMNS]
        return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)


def build(
    path: Path,
    emit: Callable[[pa.RecordBatch], None],
    *,
    scorer: Scorer | None = None,
    rescore: bool = False,
    max_rows: int | None = None,
    progress: Progress | None = None,
) -> Built:
    """Index ``path`` chunk by chunk, each chunk's columns given to ``emit``; samples with no reward
    (all of them when ``rescore``) go to ``scorer``, and a chunk's states are dropped once indexed."""
    maker, tally = ColumnMaker(), Tally()
    scored, elapsed, partial = 0, 0.0, False
    try:
        # scoring again reads the rows as `judger score` does: stored rewards and failures dropped
        for chunk in read_chunks(path, restore=not rescore, max_rows=max_rows, progress=progress):
            partial = chunk.truncated
            tally.errors.extend(chunk.errors)
            to_judge = [s for s in chunk.states if s.status == Status.COMPLETED and s.reward is None]
            if to_judge and scorer is not None:
                if progress is not None:
                    progress("scoring", len(to_judge))
                start = time.perf_counter()
                scorer(to_judge)
                elapsed += time.perf_counter() - start
                scored += len(to_judge)
            tally.add(chunk.states)
            if chunk.states:
                emit(maker.batch(chunk.states, chunk.rows))
    finally:
        close = getattr(scorer, "close", None)
        if close is not None:
            close()
    if progress is not None:
        progress("summarising", tally.samples)
    # the same object `judger score --format json` prints for this file
    summary: dict[str, Any] = {"input": str(path), **tally.summary(elapsed)}
    if tally.errors:
        summary["bad_row_errors"] = [{"row": e.row, "message": e.message} for e in tally.errors]
    return Built(list(maker.sources), len(maker.groups), scored, partial, summary, list(tally.errors))
