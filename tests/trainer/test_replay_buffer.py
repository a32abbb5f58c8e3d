"""ReplayBuffer: ready vs failed groups, sample(), and sinks that survive an interruption."""

from __future__ import annotations

from pathlib import Path

import pytest

from judger.core.errors import InputError
from judger.core.rollout import RolloutState, Status
from judger.trainer.replay_buffer import ReplayBuffer, ReplayBufferConfig, read_sink
from judger.trainer.training import prepare_train_data

pytestmark = pytest.mark.py310


def judged(gid: str, scores: list[float], status: Status = Status.COMPLETED) -> list[RolloutState]:
    return [
        RolloutState(
            message=[{"role": "user", "content": gid}],
            prompt_ids=[1, 2],
            response=f"r{i}",
            response_ids=[3, 4],
            reward={"score": s} if status == Status.COMPLETED else None,
            status=status,
            group_id=gid,
            task_name="t",
        )
        for i, s in enumerate(scores)
    ]


def test_ready_and_failed_groups_kept_apart() -> None:
    buf = ReplayBuffer()
    assert buf.add(judged("a", [1, 0]))
    assert not buf.add(judged("b", [1, 0], Status.ABORTED))
    failed = judged("c", [1, 0])
    failed[1].status, failed[1].error_msg, failed[1].reward = Status.FAILED, "generation failed: x", None
    assert not buf.add(failed)
    unjudged = judged("d", [1])
    unjudged[0].reward = None
    assert not buf.add(unjudged)
    assert buf.add(judged("e", [0, 1]))
    assert len(buf) == 2 and buf.failure_counts() == {"aborted": 1, "failed": 1, "not_judged": 1}
    assert buf.failed[1].group[1].error_msg == "generation failed: x"
    batch = buf.sample(5)
    assert [g[0].group_id for g in batch] == ["a", "e"] and len(buf) == 0
    assert len(prepare_train_data(batch).samples) == 4


def test_jsonl_sink_is_on_disk_before_close(tmp_path: Path) -> None:
    sink = tmp_path / "buf" / "groups.jsonl"
    buf = ReplayBufferConfig(sink=sink).build()
    buf.add(judged("a", [1, 0]))
    buf.add(judged("b", [1], Status.ABORTED))
    # not closed: an interrupted run still has every group
    got = list(read_sink(sink))
    got_ids = [(reason, [s.group_id for s in g]) for reason, g in got]
    assert got_ids == [(None, ["a", "a"]), ("aborted", ["b"])]
    assert got[0][1][0].reward == {"score": 1.0} and got[0][1][0].task_name == "t"
    buf.close()
    resumed = ReplayBufferConfig(sink=sink).build()  # appends
    resumed.add(judged("c", [0]))
    resumed.close()
    assert len(list(read_sink(sink))) == 3


def test_parquet_sink_writes_whole_parts(tmp_path: Path) -> None:
    sink = tmp_path / "parts"
    buf = ReplayBufferConfig(sink=sink, flush_every=2).build()
    for i in range(5):
        buf.add(judged(f"g{i}", [1, 0]))
    assert len(list(sink.glob("part-*.parquet"))) == 2  # 4 groups flushed, 1 pending
    buf.close()
    got = list(read_sink(sink))
    assert [g[0].group_id for _, g in got] == [f"g{i}" for i in range(5)]
    assert not list(sink.glob("*.tmp"))


def test_a_cut_jsonl_sink_line_is_named(tmp_path: Path) -> None:
    sink = tmp_path / "groups.jsonl"
    buf = ReplayBufferConfig(sink=sink).build()
    buf.add(judged("a", [1]))
    buf.close()
    with sink.open("a", encoding="utf-8") as fh:
        fh.write('{"group": 1, "reason": null, "sta')  # killed while writing the second group
    with pytest.raises(InputError, match=r"groups\.jsonl: row 2: not valid JSON"):
        list(read_sink(sink))
