"""Helpers shared by the trainer-side tests: small verl-layout rows and files."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def verl_row(
    answer: str, truth: str, uid: str | None = "u0", source: str = "toy", **extra: Any
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "data_source": source,
        "prompt": [{"role": "user", "content": f"what is {truth}?"}],
        "response": answer,
        "reward_model": {"style": "rule", "ground_truth": truth},
        "extra_info": {"index": 0},
    }
    if uid is not None:
        row["uid"] = uid
    row.update(extra)
    return row


@pytest.fixture
def write_jsonl(tmp_path: Path) -> Callable[..., Path]:
    def write(lines: list[Any], name: str = "rollouts.jsonl") -> Path:
        path = tmp_path / name
        with path.open("w") as fh:
            for line in lines:
                fh.write(line if isinstance(line, str) else json.dumps(line))
                fh.write("\n")
        return path

    return write


@pytest.fixture
def row() -> Callable[..., dict[str, Any]]:
    return verl_row


@pytest.fixture
def exact_match_config(tmp_path: Path) -> Path:
    """A config file scoring with judger.testing.handlers:exact_match."""
    path = tmp_path / "em_config.py"
    path.write_text(
        "from judger import JudgerConfig\n"
        "judger_config = JudgerConfig(\n"
        "    judger_name='em', reward_handler='judger.testing.handlers:exact_match'\n"
        ")\n"
    )
    return path
