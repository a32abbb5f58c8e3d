"""Reading and writing rollouts files: verl rows, RolloutState lines, Parquet, bad rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judger import RolloutState, Status
from judger.trainer.io import InputError, example_data, read_rollouts, write_rollouts

pytestmark = pytest.mark.py310


def test_verl_rows_become_states(write_jsonl, row) -> None:
    many = row("x", "1", uid=None)
    del many["response"]
    many["responses"] = ["1", "2", "3"]
    path = write_jsonl([row("1", "1", reference_grader={"correct": True}), many])
    got = read_rollouts(path)
    assert got.errors == []
    assert len(got.states) == 4 and got.rows == [1, 2, 2, 2]
    first = got.states[0]
    assert first.message == [{"role": "user", "content": "what is 1?"}]
    assert first.group_id == "u0" and first.ground_truth == "1" and first.status == Status.COMPLETED
    assert first.extra_fields["extra_info"] == {"index": 0}
    assert first.extra_fields["columns"] == {"reference_grader": {"correct": True}}
    # a responses row without uid is one prompt group of its own
    assert {s.group_id for s in got.states[1:]} == {"row-2"}
    assert [s.response for s in got.states[1:]] == ["1", "2", "3"]


def test_string_prompt_and_status_column(write_jsonl, row) -> None:
    path = write_jsonl([row("a", "a", prompt="plain prompt", status="aborted")])
    (state,) = read_rollouts(path).states
    assert state.message == [{"role": "user", "content": "plain prompt"}]
    assert state.status == Status.ABORTED


def test_bad_rows_are_reported_by_row_number_and_the_rest_read(write_jsonl, row) -> None:
    no_truth = row("1", "1")
    no_truth["reward_model"] = {"style": "rule"}
    lines = [
        row("1", "1"),
        "{not json",
        "",  # blank lines are skipped but still counted
        {"data_source": "toy", "prompt": []},
        no_truth,
        row(5, "5"),
        [1, 2],
        {"message": [], "bogus_field": 1},
        row("ok", "ok"),
    ]
    got = read_rollouts(write_jsonl(lines))
    assert [s.response for s in got.states] == ["1", "ok"]
    by_row = {e.row: e.message for e in got.errors}
    assert set(by_row) == {2, 4, 5, 6, 7, 8}
    assert "not valid JSON" in by_row[2]
    assert "'reward_model'" in by_row[4] and "response (or responses)" in by_row[4]
    assert "ground_truth" in by_row[5]
    assert "'response' must be a string" in by_row[6]
    assert "JSON object" in by_row[7]
    assert "bogus_field" in by_row[8]
    assert str(got.errors[0]).startswith("row 2:")


def test_rollout_state_lines(write_jsonl) -> None:
    state = RolloutState(message=[{"role": "user", "content": "q"}], response="a", data_source="d")
    path = write_jsonl(
        [state.model_dump(mode="json"), {"message": [], "status": "filtered", "response": "b"}]
    )
    got = read_rollouts(path)
    assert got.layout == "state" and got.errors == []
    assert got.states[0].status == Status.COMPLETED  # rows from a file are finished rollouts
    assert got.states[1].status == Status.FILTERED


def test_whole_file_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        read_rollouts(tmp_path / "missing.jsonl")
    (tmp_path / "x.csv").write_text("a,b\n")
    with pytest.raises(InputError, match="unknown format"):
        read_rollouts(tmp_path / "x.csv")
    (tmp_path / "broken.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(InputError, match="not a readable Parquet"):
        read_rollouts(tmp_path / "broken.parquet")


def test_parquet_round_trip_with_rewards(tmp_path: Path, write_jsonl, row) -> None:
    states = read_rollouts(write_jsonl([row("1", "1"), row("2", "1", uid="u1"), row("3", "1")])).states
    states[0].reward = {"score": 1.0, "acc": True, "pred": "1"}
    states[1].reward = {"score": 0.0, "extra": [1, 2]}  # keys differ between rows
    states[2].status = Status.FAILED
    states[2].error_msg = "ValueError: boom"
    states[2].extra_fields["judge_failure"] = {"judger": "j", "kind": "error"}
    out = tmp_path / "scored.parquet"
    write_rollouts(out, states)
    import pyarrow.parquet as pq

    table = pq.read_table(out).to_pylist()
    assert [r["score"] for r in table] == [1.0, 0.0, None]
    assert table[0]["reward"]["acc"] is True and table[1]["reward"]["acc"] is None
    assert table[2]["status"] == "failed" and table[2]["error_msg"] == "ValueError: boom"
    # what we wrote reads back as the same rollouts
    again = read_rollouts(out)
    assert again.errors == []
    assert [s.response for s in again.states] == ["1", "2", "3"]
    assert again.states[1].group_id == "u1"
    # it failed at judging, not at generation: read back, it is a finished rollout to judge again
    assert again.states[2].status == Status.COMPLETED


def test_parquet_mixed_types_fall_back_to_json_text(tmp_path: Path, write_jsonl, row) -> None:
    states = read_rollouts(write_jsonl([row("1", "1"), row("2", "2")])).states
    states[0].reward_model = {"ground_truth": "1"}
    states[1].reward_model = {"ground_truth": ["2", "two"]}
    out = tmp_path / "mixed.parquet"
    write_rollouts(out, states)
    again = read_rollouts(out)
    assert again.errors == []
    assert [s.ground_truth for s in again.states] == ["1", ["2", "two"]]


def test_jsonl_output_keeps_extra_columns(tmp_path: Path, write_jsonl, row) -> None:
    states = read_rollouts(write_jsonl([row("1", "1", reference_grader={"pred": "1"})])).states
    states[0].reward = {"score": 1.0}
    out = tmp_path / "o.jsonl"
    write_rollouts(out, states)
    (line,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert line["reference_grader"] == {"pred": "1"} and line["reward"] == {"score": 1.0}
    assert line["uid"] == "u0" and line["status"] == "completed"


def test_bundled_example_data_reads_cleanly() -> None:
    got = read_rollouts(example_data())
    assert got.errors == [] and len(got.states) == 400
    assert len({s.group_id for s in got.states}) == 50
    assert (example_data().parent / "LICENSE-qwen25-math-eval-data.txt").is_file()


# --- states built without a second validation ------------------------------------------


def test_read_states_equal_validated_ones(write_jsonl, row) -> None:
    extra = row("7", "7", uid="u0")
    extra["extra_info"] = {"index": 3}
    extra["note"] = "kept"
    several = {
        "data_source": {"gsm8k": 1.0},
        "prompt": [{"role": "user", "content": "q"}],
        "responses": ["1", "2"],
        "reward_model": {"ground_truth": "2"},
    }
    got = read_rollouts(write_jsonl([extra, several])).states
    assert len(got) == 3
    for state in got:
        again = RolloutState.model_validate(state.model_dump())
        assert state == again
        assert state.model_dump_json() == again.model_dump_json()
    assert got[0].extra_fields == {"extra_info": {"index": 3}, "columns": {"note": "kept"}}
    # the responses of one row own their containers: editing one leaves its siblings alone
    got[1].message[0]["content"] = "edited"
    got[1].reward_model["ground_truth"] = "x"  # type: ignore[index]
    assert got[2].message[0]["content"] == "q" and got[2].ground_truth == "2"


def test_values_the_reader_does_not_check_still_meet_validation(write_jsonl, row) -> None:
    bad_source = row("1", "1")
    bad_source["data_source"] = 5
    bool_uid = row("1", "1", uid="u")
    bool_uid["uid"] = True
    got = read_rollouts(write_jsonl([bad_source, bool_uid]))
    assert [e.row for e in got.errors] == [1]
    assert "data_source" in got.errors[0].message
    assert got.states[0].group_id == RolloutState(group_id=True).group_id


def test_parse_row_checks_keys_of_rows_not_from_a_decoder(row) -> None:
    from pydantic import ValidationError

    from judger.trainer.io import parse_row

    odd = row("1", "1")
    odd["reward_model"] = {"ground_truth": "1", 3: "x"}
    with pytest.raises(ValidationError, match="reward_model"):
        parse_row(odd, 1)


def _variants(row) -> list[dict]:
    """verl rows of the common shape and rows just off it (the reader's fast path must give what
    parse_row gives for the first, and leave the others to parse_row)."""
    base = row("7", "7", uid="u0")
    base["extra_info"] = {"index": 3}
    out = [
        base,
        {**base, "note": "kept", "reward": {"score": 1.0}, "score": 0.0},  # old output columns dropped
        {**base, "uid": 12},
        {k: v for k, v in base.items() if k not in ("uid", "extra_info")},
        {**base, "extra_info": {}},
        {**base, "data_source": None},
        {**base, "prompt": []},
        {**base, "prompt": [{"role": "user", "content": [{"type": "text", "text": "q"}]}]},
        {**base, "response": ""},
    ]
    off = [
        {**base, "response": None},
        {**base, "uid": True},
        {**base, "uid": 1.5},
        {**base, "data_source": {"gsm8k": 1.0}},
        {**base, "data_source": 5},
        {**base, "prompt": "plain"},
        {**base, "prompt": '[{"role": "user", "content": "q"}]'},
        {**base, "prompt": [["user", "q"]]},
        {**base, "reward_model": '{"ground_truth": "7"}'},
        {**base, "reward_model": {"style": "rule"}},
        {**base, "extra_info": '{"index": 3}'},
        {**base, "extra_info": [1]},
        {**base, "status": "completed"},
        {**base, "message": []},
        {**base, "responses": ["1"]},
        {k: v for k, v in base.items() if k != "data_source"},
    ]
    return [*[(r, True) for r in out], *[(r, False) for r in off]]


def test_json_lines_decode_to_what_json_loads_gives_each_line() -> None:
    from judger.trainer.io import json_rows

    lines = [
        '{"a": 1}\n',
        '{"a": 1}',  # a last line without its newline
        ' {"a": 1}\n',
        '{"a": 1}  \r\n',
        '{"a": 1}\x0c\n',  # str.isspace() takes a form feed, JSON does not
        '\ufeff{"a": 1}\n',  # a byte-order mark past the first line
        '{"a": 1} x\n',
        '{"a": 1}{"b": 2}\n',
        '{"a": ,}\n',
        '{"a": [1, 2\n',
        "tru\n",
        "NaN\n",
        '"text"\n',
        '{"a": "\\ud800", "b": 1.5e400, "c": -0.0}\n',
    ]
    for number, got in json_rows(lines, "rows.jsonl", first=False):
        line = lines[number - 1]
        try:
            expected: object = json.loads(line)
        except json.JSONDecodeError as exc:
            expected = f"row {number}: not valid JSON ({exc.msg} at column {exc.colno})"
            assert str(got) == expected, line
        else:
            assert repr(got) == repr(expected), line


def test_the_fast_row_reader_gives_what_parse_row_gives(row) -> None:
    from judger.trainer.io import parse_row, plain_row_reader

    read = plain_row_reader()
    for given, plain in _variants(row):
        fast = read(json.loads(json.dumps(given)))
        if not plain:
            assert fast is None, given
            continue
        assert fast is not None, given
        (slow,), _ = parse_row(json.loads(json.dumps(given)), 1, decoded=True)
        assert fast.__dict__ == slow.__dict__, given
        assert fast.model_fields_set == slow.model_fields_set, given
        assert fast.model_dump_json() == RolloutState.model_validate(slow.model_dump()).model_dump_json()


def test_rows_the_fast_reader_leaves_are_read_or_refused_as_before(write_jsonl, row) -> None:
    rows = [r for r, plain in _variants(row) if not plain]
    got = read_rollouts(write_jsonl(rows))
    errors = {e.row: e.message for e in got.errors}
    # refused by parse_row, in its words; the rest read as before
    assert sorted(errors) == [5, 8, 10, 12, 15, 16]
    assert "data_source" in errors[5] and "'prompt' must be a list of chat messages" in errors[8]
    assert "has both 'response' and 'responses'" in errors[15]
    assert "missing column 'data_source'" in errors[16]
    assert len(got.states) == len(rows) - len(errors)
    messages = [s.message[0]["content"] for s in got.states]
    assert messages.count("plain") == 1 and messages.count("q") == 1  # the string and JSON-text prompts
