"""`judger score -o`: never over its own input, and written atomically."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from judger.cli.main import main

pytestmark = pytest.mark.py310

# a reward field that cannot be written: the output fails after some rows were already written
UNWRITABLE_CONFIG = """
from judger import JudgerConfig


class Unprintable:
    def __str__(self):
        raise RuntimeError("cannot render this reward field")


def handler(response, label, extra_info):
    extra = {"blob": Unprintable()} if response == "last" else {}
    return {"score": float(response == label), **extra}


judger_config = JudgerConfig(judger_name="unwritable", reward_handler=handler)
"""


def _score(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["score", "--no-progress", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_output_over_the_input_is_refused(
    write_jsonl, row, exact_match_config: Path, tmp_path: Path, capsys
) -> None:
    path = write_jsonl([row("1", "1"), "garbage", row("2", "3")])
    before = path.read_bytes()
    for output in (str(path), os.path.relpath(path), str(tmp_path / "." / path.name)):
        code, _, err = _score([str(path), "-c", str(exact_match_config), "-o", output], capsys)
        assert code == 2 and "is the input file" in err
        assert path.read_bytes() == before  # the unreadable row is still there


def test_failed_write_leaves_the_previous_output(write_jsonl, row, tmp_path: Path, capsys) -> None:
    config = tmp_path / "unwritable.py"
    config.write_text(UNWRITABLE_CONFIG)
    path = write_jsonl([row("1", "1"), row("2", "2"), row("last", "x")])
    output = tmp_path / "scored.jsonl"
    output.write_text("previous run\n")
    code, _, err = _score([str(path), "-c", str(config), "-o", str(output)], capsys)
    assert code == 2 and "cannot write" in err
    assert output.read_text() == "previous run\n"
    # no spool left behind (__pycache__: the config's bytecode, where Python writes it)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__") == sorted(
        ["rollouts.jsonl", "scored.jsonl", "unwritable.py"]
    )


def test_output_written_whole(write_jsonl, row, exact_match_config: Path, tmp_path: Path, capsys) -> None:
    path = write_jsonl([row("1", "1"), row("2", "3")])
    output = tmp_path / "sub" / "scored.jsonl"
    code, _, _ = _score([str(path), "-c", str(exact_match_config), "-o", str(output)], capsys)
    assert code == 0 and len(output.read_text().splitlines()) == 2
    assert sorted(p.name for p in output.parent.iterdir()) == ["scored.jsonl"]
