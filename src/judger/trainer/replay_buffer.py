"""ReplayBuffer: judged groups waiting for the trainer, with an optional on-disk sink.

``add(group)`` files a group as *ready* (every sample trainable: see
:func:`judger.trainer.training.skip_reason`) or *failed* (aborted, failed, filtered, empty
responses), the latter with its reason; ``sample(batch_size)`` hands the oldest ready groups to the
trainer (``prepare_train_data``) and removes them.

With a sink every group added is written to disk as it arrives, so an interrupted run loses
nothing: a ``.jsonl`` sink gets one line per group, flushed at once; any other sink path is a
folder of Parquet parts (``part-00000.parquet``, ...), one complete file per ``flush_every``
groups (and at ``close()``). A line / row holds ``group`` (sequence number), ``task_name``,
``reason`` (null when ready) and ``states`` (the RolloutStates as JSON). :func:`read_sink` reads
either back.
"""

from __future__ import annotations

import json
from collections import Counter, deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel, ConfigDict, Field

from judger.core.errors import InputError
from judger.core.rollout import RolloutState
from judger.trainer.io import RowError, iter_rows
from judger.trainer.training import skip_reason


class ReplayBufferConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sink: Path | None = Field(None, description="'.jsonl' file, or a folder for Parquet parts; None: memory")
    flush_every: int = Field(64, ge=1, description="groups per Parquet part")

    def build(self) -> ReplayBuffer:
        return ReplayBuffer(self)


@dataclass
class FailedGroup:
    """A group the trainer cannot use, and why (``aborted``, ``failed``, ``empty_response``...)."""

    reason: str
    group: list[RolloutState]


def _record(seq: int, group: Sequence[RolloutState], reason: str | None) -> dict[str, Any]:
    return {
        "group": seq,
        "task_name": group[0].task_name if group else None,
        "reason": reason,
        "states": [s.model_dump(mode="json") for s in group],
    }


class ReplayBuffer:
    def __init__(self, config: ReplayBufferConfig | None = None) -> None:
        self.config = config or ReplayBufferConfig()
        self.ready: deque[list[RolloutState]] = deque()
        self.failed: list[FailedGroup] = []
        self.added = 0
        self._jsonl: TextIO | None = None
        self._pending: list[dict[str, Any]] = []
        self._parts = 0
        sink = self.config.sink
        if sink is not None:
            if sink.suffix.lower() == ".jsonl":
                sink.parent.mkdir(parents=True, exist_ok=True)
                self._jsonl = sink.open("a", encoding="utf-8")
            else:
                sink.mkdir(parents=True, exist_ok=True)
                self._parts = len(list(sink.glob("part-*.parquet")))

    def __len__(self) -> int:
        """Ready groups."""
        return len(self.ready)

    def add(self, group: Sequence[RolloutState]) -> bool:
        """File a judged group; True when the trainer can use it."""
        group = list(group)
        reason = skip_reason(group) if group else "empty_group"
        if reason is None and any(s.reward is None for s in group):
            reason = "not_judged"
        if reason is None:
            self.ready.append(group)
        else:
            self.failed.append(FailedGroup(reason, group))
        self._sink(_record(self.added, group, reason))
        self.added += 1
        return reason is None

    def sample(self, batch_size: int) -> list[list[RolloutState]]:
        """Up to ``batch_size`` ready groups, oldest first; they leave the buffer."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        return [self.ready.popleft() for _ in range(min(batch_size, len(self.ready)))]

    def failure_counts(self) -> dict[str, int]:
        return dict(Counter(f.reason for f in self.failed))

    # --- the sink ---------------------------------------------------------------------------------

    def _sink(self, record: dict[str, Any]) -> None:
        if self._jsonl is not None:
            self._jsonl.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
            self._jsonl.flush()
        elif self.config.sink is not None:
            self._pending.append(record)
            if len(self._pending) >= self.config.flush_every:
                self.flush()

    def flush(self) -> None:
        """Write the groups not yet on disk (a Parquet part)."""
        if self._jsonl is not None:
            self._jsonl.flush()
            return
        if not self._pending or self.config.sink is None:
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows, self._pending = self._pending, []
        table = pa.table(
            {
                "group": pa.array([r["group"] for r in rows], pa.int64()),
                "task_name": pa.array([r["task_name"] for r in rows], pa.string()),
                "reason": pa.array([r["reason"] for r in rows], pa.string()),
                "states": pa.array([json.dumps(r["states"], ensure_ascii=False, default=str) for r in rows]),
            }
        )
        path = self.config.sink / f"part-{self._parts:05d}.parquet"
        tmp = path.with_suffix(".tmp")
        pq.write_table(table, tmp)
        tmp.replace(path)  # a part is on disk whole or not at all
        self._parts += 1

    def close(self) -> None:
        self.flush()
        if self._jsonl is not None:
            self._jsonl.close()
            self._jsonl = None


def read_sink(sink: str | Path) -> Iterator[tuple[str | None, list[RolloutState]]]:
    """``(reason, group)`` for every group a sink holds, in the order written."""
    sink = Path(sink)
    if sink.suffix.lower() == ".jsonl":
        for _, record in iter_rows(sink):
            if isinstance(record, RowError):
                # a line cut short (the run was killed while writing it) is named, not a bare JSONDecodeError
                raise InputError(f"{sink}: {record}")
            yield record["reason"], [RolloutState.model_validate(s) for s in record["states"]]
        return
    import pyarrow.parquet as pq

    for part in sorted(sink.glob("part-*.parquet")):
        for row in pq.read_table(part).to_pylist():
            yield row["reason"], [RolloutState.model_validate(s) for s in json.loads(row["states"])]
