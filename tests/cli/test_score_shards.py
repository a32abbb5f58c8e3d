"""`judger score` in shard processes: the same output, report and exit code as one process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from judger.cli import shards
from judger.cli.main import main
from judger.cli.tally import Tally
from judger.core.rollout import RolloutState, Status
from judger.testing.rows import mixed_rows as _rows
from judger.testing.rows import parser_warning_apart as _parser_warning_apart

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

DATA = Path(__file__).resolve().parents[2] / "src" / "judger" / "data"


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any], str]:
    code = main(["score", "--no-progress", "--format", "json", "--examples", "2", *args])
    out, err = capsys.readouterr()
    summary = json.loads(out)
    summary.pop("elapsed_s")
    summary.pop("samples_per_s")
    return code, summary, err


def test_sharded_run_matches_one_process_byte_for_byte(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "rows.jsonl"
    # a BOM, and Windows line ends in the second half (counted as the text reader counts them)
    lines = _rows()
    half = len(lines) // 2
    text = "\ufeff" + "\n".join(lines[:half]) + "\n" + "\r\n".join(lines[half:]) + "\r\n"
    src.write_bytes(text.encode())
    monkeypatch.setattr(shards, "BLOCK_BYTES", 16 << 10)  # dozens of blocks, groups cut in two
    # shards started by a fork server, as in any program that calls main(); the command's own
    # process forks them: test_the_command_forks_its_shards_and_scores_as_one_process
    one, many = tmp_path / "one.jsonl", tmp_path / "many.jsonl"

    code_one, summary_one, err_one = _run([str(src), "--shards", "1", "-o", str(one)], capsys)
    code_many, summary_many, err_many = _run([str(src), "--shards", "2", "-o", str(many)], capsys)

    assert (code_many, summary_many, err_many) == (code_one, summary_one, err_one)
    assert many.read_bytes() == one.read_bytes()
    # what the comparison covers: bad rows by line number, a null response, both data sources
    assert code_one == 1 and summary_one["bad_rows"] == 15
    assert "row 9: not valid JSON" in err_one and "row 228: expected a JSON object" in err_one
    assert summary_one["failed"] == 1
    assert summary_one["data_sources"]["openai/gsm8k"]["at_n"]["n"] == 4
    assert summary_one["data_sources"]["DigitalLearningGmbH/MATH-lighteval"]["samples"] == 240
    assert len(summary_one["examples"]) == 4
    assert src.stat().st_size > (16 << 10) * 4  # it was sharded into blocks


_COMMAND = """
import sys
from judger.cli import shards
chosen, record = shards._shard_context, sys.argv.pop(1)
def spy():
    ctx, forked = chosen()
    with open(record, "a") as fh:
        fh.write(f"{forked}\\n")
    return ctx, forked
shards._shard_context = spy
shards.BLOCK_BYTES = 16 << 10
from judger.cli.main import entry
entry()  # as the console script runs it
"""


def test_the_command_forks_its_shards_and_scores_as_one_process(tmp_path: Path) -> None:
    """The command run as users run it (a process of its own, one thread): its shards are forked
    from it, and its output, report and exit code are those of one process."""
    import subprocess
    import sys

    src = tmp_path / "rows.jsonl"
    src.write_text("\n".join(_rows()) + "\n")
    chosen = tmp_path / "chosen.txt"
    runs = []
    for n in ("1", "2"):
        out = tmp_path / f"out{n}.jsonl"
        args = ["score", "--no-progress", "--format", "json", str(src), "--shards", n, "-o", str(out)]
        done = subprocess.run(
            [sys.executable, "-c", _COMMAND, str(chosen), *args], capture_output=True, text=True, timeout=300
        )
        summary = json.loads(done.stdout)
        summary.pop("elapsed_s"), summary.pop("samples_per_s")
        runs.append((done.returncode, summary, *_parser_warning_apart(done.stderr), out.read_bytes()))
    assert chosen.read_text() == "True\n"  # one sharded run, and it forked
    assert runs[1] == runs[0]
    assert runs[0][0] == 1 and runs[0][1]["judged"] == 299 and "row 9: not valid JSON" in runs[0][2]


@pytest.mark.slow  # the default config's run above covers the shards on every interpreter
def test_sharded_preset_run_matches_one_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "rows.jsonl"
    rows = [json.loads(line) for line in (DATA / "math_rollouts_dev.jsonl").read_text().splitlines() if line]
    src.write_text(
        "".join(json.dumps({k: v for k, v in r.items() if k != "data_source"}) + "\n" for r in rows)
    )
    monkeypatch.setattr(shards, "BLOCK_BYTES", 32 << 10)
    one = _run([str(src), "--preset", "math", "--shards", "1"], capsys)
    many = _run([str(src), "--preset", "math", "--shards", "3"], capsys)
    assert many == one
    assert one[1]["judged"] == 400


def test_shards_are_refused_where_they_would_not_score_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], exact_match_config: Path
) -> None:
    src = tmp_path / "rows.jsonl"
    src.write_text(_rows()[0] + "\n")
    state = tmp_path / "states.jsonl"
    state.write_text(
        RolloutState(message=[{"role": "user", "content": "q"}], response="1").model_dump_json() + "\n"
    )
    cases = [
        ([str(src), "--shards", "0"], "--shards must be >= 1"),
        ([str(src), "--shards", "2", "-c", str(exact_match_config)], "not -c"),
        ([str(src), "--shards", "2", "-o", str(tmp_path / "out.parquet")], "not Parquet"),
        ([str(src), "--shards", "2", "--html", str(tmp_path / "r.html")], "no --html"),
        (
            [str(state), "--shards", "2", "--preset", "math", "-o", str(tmp_path / "o.jsonl")],
            "RolloutState dumps",
        ),
    ]
    for args, message in cases:
        assert main(["score", "--no-progress", *args]) == 2
        assert message in capsys.readouterr().err


def test_unreadable_input_and_bad_config_are_refused_before_any_shard(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    array = tmp_path / "rows.jsonl"
    array.write_text("[" + _rows()[0] + "]\n")
    assert main(["score", "--no-progress", "--shards", "2", str(array)]) == 2
    assert "a JSON array, not JSON lines" in capsys.readouterr().err
    for shards_asked in ([], ["--shards", "2"]):  # -o reads the first row to choose: never a traceback
        folder = tmp_path / "folder.jsonl"
        folder.mkdir(exist_ok=True)
        for missing in (tmp_path / "missing.jsonl", folder):
            args = [*shards_asked, str(missing), "-o", str(tmp_path / "out.jsonl")]
            assert main(["score", "--no-progress", *args]) == 2
            err = capsys.readouterr().err
            assert "no such file" in err or "is a directory" in err, err
    assert main(["score", "--no-progress", "--shards", "2", "--preset", "no_such", str(array)]) == 2
    assert "no_such" in capsys.readouterr().err


def test_large_jsonl_with_the_default_config_is_sharded_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "rows.jsonl"
    src.write_text("\n".join(_rows()) + "\n")
    args = _args(input=str(src))
    assert shards.shard_count(args) == 0  # small: one process
    monkeypatch.setattr(shards, "MIN_SHARDED_BYTES", 1)
    monkeypatch.setattr(shards.os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    assert shards.shard_count(args) == 3
    assert shards.shard_count(_args(input=str(src), config="x.py")) == 0
    assert shards.shard_count(_args(input=str(src), output="o.parquet")) == 0
    assert shards.shard_count(_args(input=str(src), shards=1)) == 0
    assert shards.shard_count(_args(input=str(src), workers=2)) == 2  # at least a worker a shard
    assert shards.shard_count(_args(input=str(src), workers=1)) == 0
    monkeypatch.setattr(shards.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert shards.shard_count(args) == 0  # one core: nothing to gain


def test_shards_fork_only_from_the_commands_own_process_with_one_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading

    from judger.cli import process

    monkeypatch.setattr(threading, "active_count", lambda: 1)
    assert not shards._shard_context()[1]  # a program calling main(): its process is not ours
    monkeypatch.setattr(process, "owned", True)
    ctx, forked = shards._shard_context()
    assert forked and ctx.get_start_method() == "fork"
    monkeypatch.setattr(threading, "active_count", lambda: 2)  # a pool's dispatcher, a progress bar
    ctx, forked = shards._shard_context()
    assert not forked and ctx.get_start_method() == "forkserver"


def _args(**given: Any) -> Any:
    import argparse

    values = {"input": "", "output": None, "config": None, "preset": None, "html": None, "shards": None}
    values["workers"] = None
    return argparse.Namespace(**{**values, **given})


def _state(
    source: str, group: str, reward: dict[str, Any] | None, status: Status = Status.COMPLETED
) -> RolloutState:
    state = RolloutState(message=[{"role": "user", "content": group}], data_source=source, group_id=group)
    state.reward, state.status = reward, status
    return state


def test_merged_tallies_summarise_as_one_tally() -> None:
    states = [
        _state("a", "g1", {"score": 1.0, "acc": True}),
        _state("b", "g2", {"score": 0.0, "pred": "x", "tokens": 12}),  # a number only this one has
        _state("a", "g1", {"score": 0.0, "acc": False}),
        _state("a", "g3", None, Status.FAILED),
        _state("b", "g2", {"score": 1.0, "pred": 3}),  # a column that stops being numbers
        _state("c", "g4", {"score": 0.5, "extra": "late"}),
        _state("a", "g1", {"score": 1.0, "acc": True}),
    ]
    whole = Tally(1)
    whole.add(states)
    for cut in range(len(states) + 1):
        merged, first, second = Tally(1), Tally(1), Tally(1)
        first.add(states[:cut])
        second.add(states[cut:])
        merged.merge(first)
        merged.merge(second)
        assert merged.summary(1.0) == whole.summary(1.0), cut
        assert merged.examples == whole.examples, cut


def test_only_rule_presets_are_sharded_unasked() -> None:
    from judger import ComposedJudgerConfig, GSM8KJudgerConfig, JudgerConfig, MathJudgerConfig, build_judger
    from judger.cli.judging import default_config

    def handler(response: str, label: str, extra_info: Any) -> dict[str, float]:
        return {"score": float(response == label)}

    assert shards.rule_based(build_judger(default_config()))
    assert shards.rule_based(build_judger(default_config("verl")))
    own = JudgerConfig(judger_name="own", reward_handler=handler)
    assert not shards.rule_based(build_judger(own))
    mixed = ComposedJudgerConfig(branches={"math": MathJudgerConfig(), "own": own})
    assert not shards.rule_based(build_judger(mixed))
    assert not shards.rule_based(build_judger(GSM8KJudgerConfig(reward_handler=handler)))


def test_a_pool_server_is_started_for_judgers_that_may_grade_on_workers() -> None:
    from judger import GSM8KJudgerConfig, MathJudgerConfig, build_judger
    from judger.cli.judging import default_config
    from judger.cli.pools import may_use_pool, uses_pool
    from judger.compat.verl.router import VerlDefaultJudgerConfig

    router = build_judger(default_config())
    assert not uses_pool(router)  # its routes are built on first use: none yet
    assert may_use_pool(router)  # ... and the MATH route grades on the pool
    assert may_use_pool(build_judger(MathJudgerConfig()))
    assert not may_use_pool(build_judger(GSM8KJudgerConfig()))
    inline_only = {name: GSM8KJudgerConfig() for name in ("math", "dapo", "prime_math", "geo3k")}
    assert not may_use_pool(build_judger(VerlDefaultJudgerConfig(overrides=inline_only)))


_SLOW_COMMAND = """
import asyncio, sys, time
from judger.cli import score, shards
shards.BLOCK_BYTES = 4 << 10
scored = shards.score_block
async def slowly(judger, options, first_number, data):
    await asyncio.sleep(0.3)  # a block of a big file takes this long
    return await scored(judger, options, first_number, data)
shards.score_block = slowly
score.CHUNK_ROWS = 16  # in one process: a chunk of a big file takes this long
added = score._Outputs.add
def add_slowly(self, chunk):
    time.sleep(0.3)
    added(self, chunk)
score._Outputs.add = add_slowly
from judger.cli.main import entry
entry()
"""


@pytest.mark.parametrize("shards", ["1", "2"])
def test_ctrl_c_stops_a_run_and_every_process_it_started(tmp_path: Path, shards: str) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    src = tmp_path / "rows.jsonl"
    src.write_text("\n".join(_rows()) + "\n")
    out = tmp_path / "out.jsonl"
    args = ["score", "--no-progress", str(src), "--shards", shards, "-o", str(out)]
    command = subprocess.Popen(
        [sys.executable, "-c", _SLOW_COMMAND, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's Ctrl-C reaches it
    )
    # the command is running once its output's temporary file is open (on a busy machine its
    # imports alone took over the 2.5 s this test once slept, and the Ctrl-C hit the script's own
    # imports); a second more: shards forked (or the one process's chunks read), MATH on the pool
    started = time.monotonic()
    while not any(p.name.startswith(".out.") for p in tmp_path.iterdir()):
        assert command.poll() is None and time.monotonic() - started < 120, "the command never started"
        time.sleep(0.05)
    time.sleep(1.0)
    os.killpg(command.pid, signal.SIGINT)
    _, err = command.communicate(timeout=60)
    assert command.returncode == 130
    # the command's own lines, in the order it wrote them: the bad rows read so far, then one line.
    # Its shards and the pools' workers write to the same stderr on their own time (in verl's
    # environment an import in a worker warns that ANTLR's versions differ): where their lines fall
    # among the command's is the scheduler's doing, so only the command's own are in order
    own = [line for line in err.splitlines() if line.startswith((f"{src}: ", "judger score: "))]
    assert own[-1] == "judger score: interrupted"
    assert all(line.startswith(f"{src}: row ") for line in own[:-1]), own
    # no traceback, none per shard
    assert "Traceback" not in err and err.count("interrupted") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.jsonl"]  # no output, no spool
    deadline = time.monotonic() + 10
    while (alive := _running_in_group(command.pid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive  # shards, the pools' fork servers, their workers: all gone


_INTERRUPTED_WHILE_BUILDING = """
import os, signal, time
from judger.cli import score
def build(args):
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the judger is built (its imports, its config)
    time.sleep(30)
score.build = build
from judger.cli.main import entry
entry()
"""


@pytest.mark.parametrize("shards", ["1", "2"])
def test_ctrl_c_before_the_scoring_starts_is_one_line_too(tmp_path: Path, shards: str) -> None:
    import subprocess
    import sys

    src = tmp_path / "rows.jsonl"
    src.write_text("\n".join(_rows()) + "\n")
    args = ["score", "--no-progress", str(src), "--shards", shards, "-o", str(tmp_path / "out.jsonl")]
    done = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_WHILE_BUILDING, *args], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stderr) == (130, "judger score: interrupted\n")
    assert list(tmp_path.iterdir()) == [src]  # no output, no spool


def _running_in_group(pgid: int) -> list[str]:
    """Processes of the group that have not exited (an exited one may wait for init to reap it)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(stat.parent.name)
    return found
