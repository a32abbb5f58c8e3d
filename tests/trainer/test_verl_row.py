"""One verl row parser: the rollout reader and the sampler refuse a bad row with the same words."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from judger.trainer.io import parse_row
from judger.trainer.sampler import Sampler, SamplerConfig

pytestmark = pytest.mark.py310


def good(**kw: Any) -> dict[str, Any]:
    row = {
        "data_source": "toy",
        "prompt": [{"role": "user", "content": "1 + 1?"}],
        "reward_model": {"ground_truth": "2"},
        "extra_info": {"index": 0},
    }
    row.update(kw)
    return row


@pytest.fixture
def sampler(tmp_path: Path) -> Sampler:
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(good()) + "\n")
    return SamplerConfig(data_files=path, row_format="verl").build()


BAD = {
    "no ground truth": good(reward_model={"style": "rule"}),
    "reward_model not an object": good(reward_model="2"),
    "reward_model null": good(reward_model=None),
    "no reward_model": {k: v for k, v in good().items() if k != "reward_model"},
    "no data_source": {k: v for k, v in good().items() if k != "data_source"},
    "prompt of numbers": good(prompt=[1, 2]),
    "extra_info a string": good(extra_info="index 0"),
    "not an object": ["a", "list"],
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_both_readers_refuse_a_bad_verl_row_with_the_same_message(sampler: Sampler, name: str) -> None:
    row = BAD[name]
    with pytest.raises(ValueError) as from_io:
        parse_row({**row, "response": "2"} if isinstance(row, dict) else row, 1)
    with pytest.raises(ValueError) as from_sampler:
        sampler.parse_row(row, "p-1")
    assert str(from_sampler.value) == str(from_io.value)


def test_a_good_row_reads_the_same_in_both(sampler: Sampler) -> None:
    (rollout,), _ = parse_row({**good(), "response": "2"}, 1)
    prompt = sampler.parse_row(good(), "p-1")
    for name in ("message", "data_source", "reward_model", "extra_fields"):
        assert getattr(rollout, name) == getattr(prompt, name), name
