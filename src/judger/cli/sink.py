"""The output file of ``judger score``, written chunk by chunk and put in place atomically.

Rows go to a temporary file next to the output as their chunk is judged; :meth:`OutputSink.commit`
renames it over the output, so a reader never sees a half-written file and a failed run leaves any
previous output as it was. A row that UTF-8 cannot encode (a lone surrogate from a bad decoder)
is written with ``\\u`` escapes instead of losing the run: JSON readers get the same string back.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any

from judger.core.rollout import RolloutState
from judger.trainer.io import Layout, json_default, state_to_row, write_parquet_rows


def _row(state: RolloutState, layout: Layout) -> dict[str, Any]:
    return state.model_dump(mode="json") if layout == "state" else state_to_row(state)


def encode_line(row: Any) -> bytes:
    """One JSON line as UTF-8; ``\\u``-escaped where UTF-8 cannot carry a character."""
    text = json.dumps(row, ensure_ascii=False, default=json_default)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return json.dumps(row, ensure_ascii=True, default=json_default).encode("ascii") + b"\n"


def _escape_surrogates(value: Any) -> Any:
    """Strings that UTF-8 cannot carry, with their unencodable characters as ``\\udXXX`` text."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if isinstance(value, dict):
        return {k: _escape_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_escape_surrogates(v) for v in value]
    return value


class OutputSink:
    """``write(states)`` per chunk, then ``commit()`` (or ``discard()``).

    JSONL is streamed. Parquet needs one schema for the whole file (a column's type is decided
    over all its values), so its rows are held until ``commit``.
    """

    def __init__(self, output: str | Path) -> None:
        self.target = Path(output)
        self.target.parent.mkdir(parents=True, exist_ok=True)
        # same directory (a rename within one filesystem is atomic), same suffix (it picks the format)
        self.tmp = self.target.with_name(f".{self.target.stem}.{os.getpid()}.tmp{self.target.suffix}")
        self.parquet = self.target.suffix.lower() in (".parquet", ".pq")
        self.layout: Layout | None = None
        self.rows = 0
        self._rows: list[dict[str, Any]] = []
        self._fh: IO[bytes] | None = None if self.parquet else self.tmp.open("wb")

    def write(self, states: list[RolloutState], layout: Layout) -> None:
        if not states:
            return
        if self.layout is None:
            self.layout = layout  # the first rows decide, as a whole-file read would
        if self._fh is not None:
            self._fh.write(b"".join(encode_line(_row(s, self.layout)) for s in states))
            self._fh.flush()  # a chunk judged is a chunk on disk, not in a buffer
        else:
            self._rows.extend(_escape_surrogates(_row(s, self.layout)) for s in states)
        self.rows += len(states)

    def write_encoded(self, data: bytes, rows: int) -> None:
        """JSON lines already encoded (:func:`encode_line` of verl rows, by a shard's worker)."""
        assert self._fh is not None, "a Parquet output is written from states"
        self.layout = self.layout or "verl"
        self._fh.write(data)
        self._fh.flush()
        self.rows += rows

    def commit(self) -> None:
        try:
            if self._fh is not None:
                self._fh.close()
            else:
                write_parquet_rows(self.tmp, self._rows)
                self._rows = []
            os.replace(self.tmp, self.target)
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        if self._fh is not None:
            self._fh.close()
        self._rows = []
        self.tmp.unlink(missing_ok=True)
