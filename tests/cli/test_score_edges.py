"""`judger score` off the happy path: nothing scored silently, nothing held whole, nothing lost."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from judger.cli import score as score_cli
from judger.cli.main import main
from judger.cli.report import render_summary

pytestmark = pytest.mark.py310

# a handler that, on the row answering "probe", records what the output's temporary file holds
CONFIG_PROBE = """
from pathlib import Path

from judger import JudgerConfig

def probe(response, label, extra_info):
    seen = {}
    if response == "probe":  # what is on disk while this sample is judged, in its reward
        folder = Path(extra_info["folder"])
        spools = list(folder.glob(".scored.*.tmp.jsonl"))
        seen["spooled_lines"] = sum(len(p.read_text().splitlines()) for p in spools)
        seen["final_exists"] = (folder / "scored.jsonl").exists()
    return {"score": float(response == label), "acc": response == label, **seen}


judger_config = JudgerConfig(judger_name="probe", reward_handler=probe)
"""

CONFIG_FLOAT = """
from judger import JudgerConfig


def broken(response, label, extra_info):
    return 1.0


judger_config = JudgerConfig(judger_name="broken", reward_handler=broken)
"""

CONFIG_HUGE_INT = """
from judger import JudgerConfig


def digits(response, label, extra_info):
    return {"score": float(response == label), "digits": 10**400 if response == "huge" else len(response)}


judger_config = JudgerConfig(judger_name="digits", reward_handler=digits)
"""


# a handler that reports, as reward variables, what the process's cyclic collector is doing
CONFIG_COLLECTOR = """
import gc

from judger import JudgerConfig


def collector(response, label, extra_info):
    return {"score": 1.0, "collecting": float(gc.isenabled()), "frozen": float(gc.get_freeze_count() > 0)}


# on threads: what it reports is the state of the command's own process
judger_config = JudgerConfig(judger_name="collector", reward_handler=collector, execution="thread")
"""

# an async handler that waits (as one calling an HTTP service does) before it answers
CONFIG_WAITING = """
import asyncio

from judger import JudgerConfig


async def waiting(response, label, extra_info):
    await asyncio.sleep(0.02)
    return {"score": float(response.removeprefix("#### ") == label)}


judger_config = JudgerConfig(judger_name="waiting", reward_handler=waiting)
"""


def _src_env() -> dict[str, str]:
    src = str(Path(__file__).resolve().parents[2] / "src")
    return {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _score(
    args: list[str], capsys: pytest.CaptureFixture[str], progress: bool = False
) -> tuple[int, str, str]:
    code = main(["score", *([] if progress else ["--no-progress"]), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_reads_judges_and_writes_in_chunks(
    write_jsonl: Any,
    row: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rows of earlier chunks are on disk (in the spool, not yet the output) while a later chunk is
    judged: the file is streamed, not held."""
    monkeypatch.setattr(score_cli, "CHUNK_ROWS", 2, raising=False)
    info = {"folder": str(tmp_path)}
    rows = [row(str(i), str(i), uid=f"u{i}", extra_info=info) for i in range(6)]
    rows.append(row("probe", "probe", uid="p", extra_info=info))
    config = tmp_path / "probe_config.py"
    config.write_text(CONFIG_PROBE)
    out_path = tmp_path / "scored.jsonl"
    code, out, _ = _score(
        [str(write_jsonl(rows)), "-c", str(config), "-o", str(out_path), "--format", "json"], capsys
    )
    assert code == 0 and json.loads(out)["judged"] == 7
    written = [json.loads(line) for line in out_path.read_text().splitlines()]
    assert [r["response"] for r in written] == [*map(str, range(6)), "probe"]
    seen = written[-1]["reward"]
    assert (seen["spooled_lines"], seen["final_exists"]) == (6, False)
    assert not list(tmp_path.glob(".scored.*"))  # the spool was renamed into place


def test_one_reward_holding_an_int_past_floats_range_does_not_stop_the_run(
    write_jsonl: Any, row: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A reward variable is the judger's to fill: one int too large for a float stopped the whole run
    (OverflowError in the report); now that value counts as missing and every row is kept."""
    rows = [row(r, "7", uid=f"u{i % 2}") for i, r in enumerate(["7", "huge", "7", "12"])]
    config = tmp_path / "huge_config.py"
    config.write_text(CONFIG_HUGE_INT)
    out_path = tmp_path / "scored.jsonl"
    code, out, err = _score(
        [str(write_jsonl(rows)), "-c", str(config), "-o", str(out_path), "--format", "json"], capsys
    )
    assert code == 0, err
    source = json.loads(out)["data_sources"]["toy"]
    assert source["judged"] == 4 and source["mean_score"] == 0.5
    # the huge value is missing, the others count: 1 and 1 in u0, 2 in u1
    assert source["metrics"]["digits"]["mean@2"] == 1.0 and source["metrics"]["score"]
    written = [json.loads(line) for line in out_path.read_text().splitlines()]
    assert [r["reward"]["digits"] for r in written] == [1, 10**400, 1, 2]


def test_a_null_response_is_failed_with_a_reason_not_scored(
    write_jsonl: Any, row: Any, exact_match_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [row(None, "7"), row("7", "7", uid="u1")]
    several = row("x", "7", uid="u2")
    del several["response"]
    several["responses"] = [None, "7"]
    out_path = tmp_path / "scored.jsonl"
    code, out, _ = _score(
        [
            str(write_jsonl([*rows, several])),
            "-c",
            str(exact_match_config),
            "-o",
            str(out_path),
            "--format",
            "json",
        ],
        capsys,
    )
    summary = json.loads(out)
    assert code == 3 and summary["failed"] == 2 and summary["judged"] == 2
    assert summary["data_sources"]["toy"]["mean_score"] == 1.0  # the missing answers are not zeros
    assert summary["data_sources"]["toy"]["failure_reasons"] == [
        {"reason": "NoResponseError: nothing to judge: the response is null", "count": 2}
    ]
    written = [json.loads(line) for line in out_path.read_text().splitlines()]
    assert [(r["status"], r["score"]) for r in written] == [
        ("failed", None),
        ("completed", 1.0),
        ("failed", None),
        ("completed", 1.0),
    ]
    assert written[0]["error_msg"].endswith("nothing to judge: the response is null")


def test_top_failure_reasons_per_source_in_json_and_under_the_table(
    write_jsonl: Any, row: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_jsonl([row("1", "1", uid=f"u{i}") for i in range(4)])
    config = tmp_path / "float_config.py"
    config.write_text(CONFIG_FLOAT)
    code, out, _ = _score([str(path), "-c", str(config), "--format", "json"], capsys)
    reasons = json.loads(out)["data_sources"]["toy"]["failure_reasons"]
    assert code == 3 and len(reasons) == 1 and reasons[0]["count"] == 4
    assert "float" in reasons[0]["reason"]
    code, out, _ = _score([str(path), "-c", str(config)], capsys)
    under = out[out.index("failure reasons") :]
    assert "toy: 4 failed" in under and f"4 x {reasons[0]['reason'][:40]}" in under

    # the default routing, an unknown data_source: the reason names it
    code, out, _ = _score([str(write_jsonl([row("1", "1", source="nowhere")]))], capsys)
    assert "data_source='nowhere'" in out[out.index("failure reasons") :]


def test_the_table_is_readable_in_80_columns() -> None:
    row = {
        "samples": 1024,
        "judged": 1024,
        "skipped": 0,
        "failed": 12,
        "timed_out": 3,
        "mean_score": 0.4567,
        "accuracy": 0.4567,
        "at_n": {"n": 16, "variable": "acc", "mean": 0.4567, "best": 0.8912, "maj": 0.5123, "pass": 0.9346},
        "metrics": {},
        "failure_reasons": [],
    }
    summary = {
        "samples": 2048,
        "judged": 2048,
        "skipped": 0,
        "failed": 24,
        "timed_out": 6,
        "bad_rows": 0,
        "elapsed_s": 2.0,
        "samples_per_s": 1024.0,
        "data_sources": {"DigitalLearningGmbH/MATH-lighteval": row, "openai/gsm8k": row},
    }
    console = Console(record=True, width=80)
    render_summary(summary, console)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text
    for value in ("1024", "0.457", "0.891", "0.512", "0.935", "mean@16", "pass@16"):
        assert value in text


def test_preset_rows_need_no_data_source(
    write_jsonl: Any, row: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    r = row("#### 7", "7")
    del r["data_source"]
    path = write_jsonl([r])
    code, out, _ = _score([str(path), "--preset", "gsm8k", "--format", "json"], capsys)
    assert code == 0 and json.loads(out)["data_sources"]["<none>"]["mean_score"] == 1.0
    # the default config routes on data_source: it is still asked for, and the message says why
    code, _, err = _score([str(path)], capsys)
    assert code == 2 and "'data_source'" in err and "--preset" in err


def test_a_json_array_file_is_told_to_use_jsonl(
    tmp_path: Path, row: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, text in (
        ("one_line.json", json.dumps([row("7", "7"), row("8", "7")])),
        ("pretty.json", json.dumps([row("7", "7")], indent=2)),
    ):
        path = tmp_path / name
        path.write_text(text)
        code, _, err = _score([str(path), "--preset", "gsm8k"], capsys)
        assert code == 2 and "use JSONL" in err, err


def test_a_utf8_bom_keeps_the_first_row(tmp_path: Path, row: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_text(
        "\ufeff" + "\n".join(json.dumps(row(f"#### {i}", str(i), uid=f"u{i}")) for i in range(3)) + "\n"
    )
    code, out, err = _score([str(path), "--preset", "gsm8k", "--format", "json"], capsys)
    summary = json.loads(out)
    assert code == 0 and summary["samples"] == 3 and summary["bad_rows"] == 0, err


def test_verl_rollout_data_dir_dumps_are_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # what verl's _dump_generations writes: the decoded prompt and response, gts, score, step, extras
    dump = tmp_path / "12.jsonl"
    lines = [
        {
            "input": "user\nWhat is 6 x 7?\nassistant\n",
            "output": "6 x 7 = 42. #### 42",
            "gts": "42",
            "score": 1.0,
            "step": 12,
            "acc": True,
        },
        {
            "input": "user\nWhat is 2 + 2?\nassistant\n",
            "output": "#### 5",
            "gts": "4",
            "score": 0.0,
            "step": 12,
            "acc": False,
        },
    ]
    dump.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out_path = tmp_path / "rescored.jsonl"
    code, out, err = _score([str(dump), "--preset", "gsm8k", "-o", str(out_path), "--format", "json"], capsys)
    summary = json.loads(out)
    assert code == 0 and summary["bad_rows"] == 0 and summary["judged"] == 2, err
    assert summary["data_sources"]["<none>"]["mean_score"] == 0.5
    written = [json.loads(line) for line in out_path.read_text().splitlines()]
    assert written[0]["prompt"] == [{"role": "user", "content": lines[0]["input"]}]
    assert written[0]["reward_model"] == {"ground_truth": "42"} and written[0]["step"] == 12
    assert [r["score"] for r in written] == [1.0, 0.0]


def test_a_verl_dump_under_the_default_routing_says_preset_once_at_the_top(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """verl's validation dumps carry no data_source, so verl's dispatch fails every sample: the
    report says, once and first, to name the judger, and no reason is cut off mid-word."""
    dump = tmp_path / "0.jsonl"
    rows = [
        {"input": f"user\n1 + {i}?\nassistant\n", "output": f"#### {i + 1}", "gts": str(i + 1)}
        for i in range(3)
    ]
    dump.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, _ = _score([str(dump)], capsys)
    assert code == 3
    assert out.startswith("judger score: 3 samples have no data_source"), out
    assert out.count("--preset") == 1 and "-c my_config.py" in out
    code, out, _ = _score([str(dump), "--format", "json"], capsys)
    summary = json.loads(out)
    assert "--preset" in summary["hint"]
    (reason,) = summary["data_sources"]["<none>"]["failure_reasons"]
    assert reason["reason"] == "NotImplementedError: Reward function is not implemented for data_source=None"
    code, out, _ = _score([str(dump), "--preset", "gsm8k", "--format", "json"], capsys)
    assert code == 0 and "hint" not in json.loads(out)


def test_a_long_failure_reason_is_cut_at_a_word(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "unknown.jsonl"
    words = " ".join(f"word{i}" for i in range(80))
    path.write_text(
        json.dumps({"data_source": words, "response": "x", "reward_model": {"ground_truth": "1"}}) + "\n"
    )
    code, out, _ = _score([str(path), "--format", "json"], capsys)
    (reason,) = json.loads(out)["data_sources"][words]["failure_reasons"]
    text = reason["reason"]
    assert code == 3 and text.endswith(" …") and len(text) <= 202
    assert text.removesuffix(" …").split()[-1] in {f"word{i}" for i in range(80)}, text


def test_a_lone_surrogate_is_escaped_not_the_run_lost(
    tmp_path: Path, row: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "surrogate.jsonl"
    # a lone surrogate in JSON text: valid JSON, decodes to a str UTF-8 cannot encode
    path.write_text(
        json.dumps(row("#### 7 \ud800", "7")) + "\n" + json.dumps(row("#### 3", "3", uid="u1")) + "\n"
    )
    out_path = tmp_path / "scored.jsonl"
    code, _, err = _score([str(path), "--preset", "gsm8k", "-o", str(out_path), "--format", "json"], capsys)
    assert code == 0 and "cannot write" not in err, err
    written = [json.loads(line) for line in out_path.read_text(encoding="utf-8").splitlines()]
    assert written[0]["response"] == "#### 7 \ud800" and written[1]["score"] == 1.0


def test_progress_counts_rows_on_a_terminal_only(
    write_jsonl: Any,
    row: Any,
    exact_match_config: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = write_jsonl([row("7", "7")])
    code, _, err = _score(
        [str(path), "-c", str(exact_match_config), "--format", "json"], capsys, progress=True
    )
    assert code == 0 and err == ""  # not a terminal: no bar, no control characters
    import sys

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    code, _, err = _score(
        [str(path), "-c", str(exact_match_config), "--format", "json"], capsys, progress=True
    )
    assert code == 0 and re.search(r"rows", err), err


def test_the_collector_threshold_is_raised_while_scoring_and_restored_after(
    write_jsonl: Any, row: Any, exact_match_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import gc

    seen: list[int] = []
    real = score_cli.score_states

    async def spy(*args: Any, **kwargs: Any) -> None:
        seen.append(gc.get_threshold()[0])
        await real(*args, **kwargs)

    before = gc.get_threshold()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(score_cli, "score_states", spy)
        code, _, _ = _score([str(write_jsonl([row("1", "1")])), "-c", str(exact_match_config)], capsys)
    assert code == 0 and seen and seen[0] >= 50_000
    assert gc.get_threshold() == before


def test_the_commands_own_process_collects_cycles_while_it_scores(
    tmp_path: Path, write_jsonl: Any, row: Any
) -> None:
    # the console script keeps the collector off while it imports: it must be on again (with the
    # imported objects frozen out of its way) by the time anything is judged, or cycles would pile
    # up for the whole run of `judger score` or `judger serve`
    config = tmp_path / "collector.py"
    config.write_text(CONFIG_COLLECTOR)
    rows = write_jsonl([row("1", "1", uid=f"u{i}") for i in range(3)])
    command = [sys.executable, "-m", "judger", "score", str(rows), "-c", str(config), "--format", "json"]
    done = subprocess.run(
        [*command, "--no-progress"], capture_output=True, text=True, timeout=300, env=_src_env()
    )
    assert done.returncode == 0, done.stderr
    metrics = json.loads(done.stdout)["data_sources"]["toy"]["metrics"]
    assert metrics["collecting"]["mean@1"] == 1.0
    assert metrics["frozen"]["mean@1"] == 1.0


def _reads_in_chunks_of_two(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Make `judger score` read chunks of two rows; the list it gives says, of each read, whether
    it ran beside the judging (in another thread than the main one)."""
    import threading

    beside: list[bool] = []
    real = score_cli._next_chunk

    def spy(chunks: Any) -> Any:
        beside.append(threading.current_thread() is not threading.main_thread())
        return real(chunks)

    monkeypatch.setattr(score_cli, "_next_chunk", spy)
    monkeypatch.setattr(score_cli, "CHUNK_ROWS", 2)
    return beside


@pytest.mark.parametrize(
    ("judger", "read_beside"),
    # the file's first chunk is read before any judging, then the other two and the end of the file
    [("--preset gsm8k", [False, False, False, False]), ("waiting", [False, True, True, True])],
)
def test_the_next_chunk_is_read_beside_a_judger_that_waits_and_in_turn_beside_one_that_computes(
    judger: str,
    read_beside: list[bool],
    tmp_path: Path,
    write_jsonl: Any,
    row: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if judger == "waiting":
        config = tmp_path / "waiting.py"
        config.write_text(CONFIG_WAITING)
        chosen = ["-c", str(config)]
    else:
        chosen = judger.split()
    beside = _reads_in_chunks_of_two(monkeypatch)
    rows = write_jsonl([row(f"#### {i}", str(i) if i % 2 else "x", uid=f"u{i}") for i in range(6)])
    code, out, _ = _score([str(rows), *chosen, "--format", "json"], capsys)
    assert code == 0
    summary = json.loads(out)
    assert summary["judged"] == 6 and summary["data_sources"]["toy"]["mean_score"] == 0.5
    assert beside == read_beside


def test_the_default_routing_reads_beside_once_a_route_that_waits_is_built(
    write_jsonl: Any, row: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    beside = _reads_in_chunks_of_two(monkeypatch)
    gsm8k = [row(f"#### {i}", str(i), uid=f"g{i}", source="openai/gsm8k") for i in range(2)]
    math = [row(f"\\boxed{{{i}}}", str(i), uid=f"m{i}", source="lighteval/MATH") for i in range(4)]
    code, out, _ = _score([str(write_jsonl(gsm8k + math)), "--format", "json"], capsys)
    assert code == 0 and json.loads(out)["judged"] == 6
    # GSM8K's scorer computes in this thread; MATH's route grades on worker processes: once built
    # (judging the second chunk, read in turn), the reads go beside
    assert beside == [False, False, False, True]


@pytest.mark.parametrize(
    ("step", "shards"), [("_stream", "1"), ("_guarded", "2"), ("_finish", "1"), ("_finish", "2")]
)
def test_ctrl_c_outside_the_scoring_leaves_no_half_file(
    tmp_path: Path,
    row: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    step: str,
    shards: str,
) -> None:
    """Ctrl-C just before the scoring's own handler takes over, or after it, before the output is
    put in place: no half file is left (the console script's entry, or the sharded run, says it)."""
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(row("#### 3", "3")) + "\n")

    def interrupted(*args: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(score_cli, step, interrupted)
    args = [str(path), "--preset", "gsm8k", "--shards", shards, "-o", str(tmp_path / "scored.jsonl")]
    if shards == "1":
        with pytest.raises(KeyboardInterrupt):
            _score(args, capsys)
    else:  # the sharded run stops its shards and says it
        assert _score(args, capsys)[::2] == (130, "judger score: interrupted\n")
    assert list(tmp_path.iterdir()) == [path]
