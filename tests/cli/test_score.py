"""`judger score` end to end: real files, real judgers, the real command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from judger.cli.main import main

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

CONFIG_WITH_FAILURES = """
import asyncio
import time

from judger import JudgerConfig


def flaky(response, label, extra_info):
    if response == "boom":
        raise ValueError("boom")
    if response == "slow":
        time.sleep(1.5)
    acc = response.strip() == str(label)
    return {"score": 1.0 if acc else 0.0, "acc": acc, "pred": response.strip()}


judger_config = JudgerConfig(judger_name="flaky", reward_handler=flaky, timeout=0.5)
"""

CONFIG_COUNTING = """
import asyncio

from judger import JudgerConfig

state = {"now": 0, "peak": 0}


async def counted(response, label, extra_info):
    state["now"] += 1
    state["peak"] = max(state["peak"], state["now"])
    await asyncio.sleep(0.02)
    state["now"] -= 1
    return {"score": float(state["peak"])}


config = JudgerConfig(judger_name="counted", reward_handler=counted)
"""


def _score(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["score", "--no-progress", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def toy_file(write_jsonl, row) -> Path:
    # prompt u0: 1 of 2 right; prompt u1: 2 of 2 right; source "other": one sample
    return write_jsonl(
        [
            row("7", "7", uid="u0"),
            row("8", "7", uid="u0"),
            row("3", "3", uid="u1"),
            row("3", "3", uid="u1"),
            row("x", "y", uid="v0", source="other"),
        ]
    )


def test_json_summary_per_data_source(toy_file: Path, exact_match_config: Path, capsys) -> None:
    code, out, _ = _score([str(toy_file), "-c", str(exact_match_config), "--format", "json"], capsys)
    assert code == 0
    summary = json.loads(out)  # stdout is exactly one JSON object
    assert summary["samples"] == 5 and summary["failed"] == 0 and summary["bad_rows"] == 0
    toy = summary["data_sources"]["toy"]
    assert toy["samples"] == 4 and toy["accuracy"] == 0.75 and toy["mean_score"] == 0.75
    assert toy["at_n"]["n"] == 2 and toy["at_n"]["variable"] == "acc"
    assert toy["at_n"]["mean"] == 0.75
    assert toy["at_n"]["pass"] == 1.0  # both prompts have a correct sample among 2
    assert toy["at_n"]["maj"] is not None and 0.5 <= toy["at_n"]["best"] <= 1.0
    assert toy["metrics"]["acc"]["mean@2"] == 0.75
    other = summary["data_sources"]["other"]
    assert other["accuracy"] == 0.0 and other["at_n"] is None
    assert summary["samples_per_s"] > 0


def test_table_examples_and_outputs(toy_file: Path, exact_match_config: Path, tmp_path: Path, capsys) -> None:
    out_jsonl = tmp_path / "scored.jsonl"
    code, out, _ = _score(
        [str(toy_file), "-c", str(exact_match_config), "--examples", "1", "-o", str(out_jsonl)], capsys
    )
    assert code == 0
    assert "mean@2" in out and "pass@2" in out and "toy" in out and "other" in out
    assert "ground_truth" in out and "what is 7?" in out  # one example per data_source
    rows = [json.loads(line) for line in out_jsonl.read_text().splitlines()]
    assert [r["score"] for r in rows] == [1.0, 0.0, 1.0, 1.0, 0.0]
    assert rows[1]["reward"]["pred"] == "8"

    out_parquet = tmp_path / "scored.parquet"
    code, _, _ = _score([str(toy_file), "-c", str(exact_match_config), "-o", str(out_parquet)], capsys)
    import pyarrow.parquet as pq

    assert code == 0 and pq.read_table(out_parquet).column("score").to_pylist() == [1.0, 0.0, 1.0, 1.0, 0.0]


def test_json_examples(toy_file: Path, exact_match_config: Path, capsys) -> None:
    code, out, _ = _score(
        [str(toy_file), "-c", str(exact_match_config), "--format", "json", "--examples", "1"], capsys
    )
    assert code == 0
    examples = json.loads(out)["examples"]
    assert [e["data_source"] for e in examples] == ["toy", "other"]
    assert examples[0] | {"prompt": None} == {
        "data_source": "toy",
        "prompt": None,
        "response": "7",
        "ground_truth": "7",
        "pred": "7",
        "score": 1.0,
        "acc": True,
        "status": "completed",
        "error": None,
    }


def test_bad_rows_reported_rest_scored(write_jsonl, row, exact_match_config: Path, capsys) -> None:
    path = write_jsonl([row("1", "1"), "garbage", {"data_source": "toy"}, row("2", "2")])
    code, out, err = _score([str(path), "-c", str(exact_match_config), "--format", "json"], capsys)
    assert code == 1
    assert "row 2: not valid JSON" in err and "row 3: missing column" in err
    summary = json.loads(out)
    assert summary["samples"] == 2 and summary["bad_rows"] == 2
    assert [e["row"] for e in summary["bad_row_errors"]] == [2, 3]


def test_unusable_input_and_config(tmp_path: Path, toy_file: Path, exact_match_config: Path, capsys) -> None:
    code, _, err = _score([str(tmp_path / "nope.jsonl"), "-c", str(exact_match_config)], capsys)
    assert code == 2 and "no such file" in err
    code, _, err = _score([str(toy_file), "-c", str(tmp_path / "missing.py")], capsys)
    assert code == 2 and "does not exist" in err
    code, _, err = _score([str(toy_file), "-c", "judger.testing.handlers:exact_match"], capsys)
    assert code == 2 and "not a JudgerConfig" in err
    code, _, err = _score([str(toy_file), "--preset", "NoSuchThing"], capsys)
    assert code == 2 and "unknown preset 'NoSuchThing'" in err


def test_failures_and_timeouts_are_counted(write_jsonl, row, tmp_path: Path, capsys) -> None:
    config = tmp_path / "flaky_config.py"
    config.write_text(CONFIG_WITH_FAILURES)
    path = write_jsonl([row("1", "1"), row("boom", "1"), row("slow", "1"), row("2", "1")])
    out_file = tmp_path / "o.jsonl"
    code, out, _ = _score([str(path), "-c", str(config), "--format", "json", "-o", str(out_file)], capsys)
    assert code == 3
    toy = json.loads(out)["data_sources"]["toy"]
    assert (toy["samples"], toy["judged"], toy["failed"], toy["timed_out"]) == (4, 2, 1, 1)
    assert toy["accuracy"] == 0.5  # failed samples are not counted as wrong answers
    rows = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert rows[1]["status"] == "failed" and "boom" in rows[1]["error_msg"]
    assert rows[2]["judge_failure"]["kind"] == "timeout" and rows[2]["reward"] is None


def test_workers_bounds_concurrency(write_jsonl, row, tmp_path: Path, capsys) -> None:
    config = tmp_path / "counting_config.py"
    config.write_text(CONFIG_COUNTING)
    path = write_jsonl([row(str(i), "0", uid=f"u{i}") for i in range(12)])
    code, out, _ = _score([str(path), "-c", f"{config}:config", "--workers", "2", "--format", "json"], capsys)
    assert code == 0
    summary = json.loads(out)
    # every sample's score is the peak concurrency seen so far
    assert summary["data_sources"]["toy"]["metrics"]["score"]["mean@1"] <= 2.0
    code, out, _ = _score([str(path), "-c", f"{config}:config", "--format", "json"], capsys)
    assert json.loads(out)["data_sources"]["toy"]["metrics"]["score"]["mean@1"] > 2.0


def test_preset_by_short_name(write_jsonl, row, capsys) -> None:
    import judger.presets as presets

    try:
        presets.GSM8KJudgerConfig  # noqa: B018
    except (AttributeError, ImportError):
        pytest.skip("GSM8K preset not available yet")
    path = write_jsonl(
        [row("so #### 72", "72", source="openai/gsm8k"), row("#### 7", "72", source="openai/gsm8k")]
    )
    code, out, _ = _score([str(path), "--preset", "gsm8k", "--format", "json"], capsys)
    assert code == 0
    assert json.loads(out)["data_sources"]["openai/gsm8k"]["mean_score"] == 0.5


def test_real_command_in_a_subprocess(toy_file: Path, exact_match_config: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "judger.cli.main",
            "score",
            str(toy_file),
            "-c",
            str(exact_match_config),
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["data_sources"]["toy"]["accuracy"] == 0.75


def test_default_config_routes_by_data_source_on_bundled_data(tmp_path: Path, capsys) -> None:
    import judger.compat.verl  # noqa: F401  (judger's own: an import error fails the test)
    from judger.trainer.io import example_data

    lines = example_data().read_text().splitlines()[:48]  # 6 prompts x 8 real responses
    path = tmp_path / "slice.jsonl"
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "scored.jsonl"
    code, stdout, _ = _score([str(path), "--format", "json", "-o", str(out)], capsys)
    assert code == 0
    math = json.loads(stdout)["data_sources"]["DigitalLearningGmbH/MATH-lighteval"]
    assert math["samples"] == 48 and math["at_n"]["n"] == 8
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    # the default MATH judge mostly agrees with the Qwen2.5-Math reference grader (which is not
    # ground truth: it rejects "4:30 p.m." for \text{4:30 p.m.}, the 8 samples of math-3)
    agree = sum(bool(r["reward"]["acc"]) == r["reference_grader"]["correct"] for r in rows)
    assert agree >= 38, agree
    code, stdout, _ = _score([str(path), "--format", "json", "--compat", "verl"], capsys)
    assert code == 0
    verl_acc = json.loads(stdout)["data_sources"]["DigitalLearningGmbH/MATH-lighteval"]["accuracy"]
    assert verl_acc <= math["accuracy"]  # verl's string compare only adds false negatives
    code, _, err = _score([str(path), "--compat", "verl", "--preset", "math"], capsys)
    assert code == 2 and "--compat applies to the default config only" in err


def test_unfinished_rows_are_skipped_and_judge_failures_rescored(
    write_jsonl, row, tmp_path: Path, exact_match_config: Path, capsys
) -> None:
    path = write_jsonl([row("1", "1"), row("1", "1", status="aborted")])
    code, out, _ = _score([str(path), "-c", str(exact_match_config), "--format", "json"], capsys)
    summary = json.loads(out)
    assert code == 0 and summary["skipped"] == 1 and summary["judged"] == 1
    assert summary["data_sources"]["toy"]["accuracy"] == 1.0

    # a row that failed at judging (as -o writes it) is judged again; one that failed earlier is not
    judge_failed = row("1", "1", status="failed", judge_failure={"judger": "x", "kind": "timeout"})
    gen_failed = row("1", "1", status="failed")
    path = write_jsonl([judge_failed, gen_failed], name="again.jsonl")
    code, out, _ = _score([str(path), "-c", str(exact_match_config), "--format", "json"], capsys)
    summary = json.loads(out)
    assert (summary["judged"], summary["skipped"], summary["failed"]) == (1, 1, 0)


def test_raising_judger_and_unwritable_output(
    toy_file: Path, tmp_path: Path, exact_match_config: Path, capsys
) -> None:
    config = tmp_path / "raising_config.py"
    config.write_text(
        "from judger import JudgerConfig\n"
        "def bad(response, label, extra_info):\n"
        "    raise RuntimeError('no')\n"
        "judger_config = JudgerConfig(judger_name='bad', reward_handler=bad, on_error='raise')\n"
    )
    code, out, err = _score([str(toy_file), "-c", str(config)], capsys)
    assert code == 2 and "scoring stopped: " in err and "no" in err and out == ""
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, out, err = _score(
        [str(toy_file), "-c", str(exact_match_config), "-o", str(blocker / "x.jsonl")], capsys
    )
    assert code == 2 and "cannot write" in err and "mean@2" in out  # the summary is still shown


# --- start-up and garbage collection ---------------------------------------------------


def test_in_process_runs_leave_the_collector_as_they_found_it(
    toy_file: Path, exact_match_config: Path, capsys
) -> None:
    import gc

    frozen = gc.get_freeze_count()
    code, out, _ = _score([str(toy_file), "-c", str(exact_match_config), "--format", "json"], capsys)
    assert code == 0 and json.loads(out)["samples"] == 5
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen  # freezing is only for the command's own process


def test_own_process_json_mode_never_imports_rich(toy_file: Path, exact_match_config: Path) -> None:
    script = (
        "import gc, sys\n"
        "from judger.cli import process\n"
        "from judger.cli.main import main\n"
        "process.owned = True\n"
        f"code = main(['score', '--no-progress', '--format', 'json', {str(toy_file)!r}, "
        f"'-c', {str(exact_match_config)!r}])\n"
        "rich = sorted(m for m in sys.modules if m == 'rich' or m.startswith('rich.'))\n"
        "print('RESULT', code, gc.isenabled(), rich, file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "RESULT 0 True []" in proc.stderr


@pytest.mark.parametrize("compat", [None, "verl"])
def test_gsm8k_worked_solution_labels_read_as_final_answer(write_jsonl, row, capsys, compat) -> None:
    """openai/gsm8k ships ``answer`` as a worked solution ending ``#### <answer>``: a row carrying it as
    the label is scored against that final answer, by the routing default and the preset alike."""
    solution = "She sold 48 / 2 = 24 in May.\nSo 48 + 24 = 72 in all.\n#### 72"
    path = write_jsonl(
        [
            row("so 48 + 24 = 72\n#### 72", solution, source="openai/gsm8k"),
            row("#### 71", solution, source="openai/gsm8k"),
            row("#### 1200", "So 1,000 + 200 = 1,200.\n#### 1,200", source="openai/gsm8k"),
        ]
    )
    for how in (["--compat", compat] if compat else [], ["--preset", "gsm8k"]):
        code, out, _ = _score([str(path), *how, "--format", "json"], capsys)
        summary = json.loads(out)["data_sources"]["openai/gsm8k"]
        assert code == 0 and summary["mean_score"] == pytest.approx(2 / 3), how
