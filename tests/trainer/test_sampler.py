"""Sampler: verl and GSM8K layouts, field mapping, bad rows, seeded shuffling, epochs, filtering."""

from __future__ import annotations

import json
from collections import UserDict
from pathlib import Path
from typing import Any

import pytest

from judger.core.rollout import Status
from judger.trainer.io import example_data, write_rollouts
from judger.trainer.sampler import GSM8K_INSTRUCTION, SamplerConfig

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]


def write(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def verl(i: int, **kw: Any) -> dict[str, Any]:
    row = {
        "data_source": "toy",
        "prompt": [{"role": "user", "content": f"question {i}"}],
        "reward_model": {"ground_truth": str(i)},
        "extra_info": {"index": i},
    }
    row.update(kw)
    return row


def test_bundled_gsm8k_in_its_own_layout() -> None:
    sampler = SamplerConfig(data_files=example_data("gsm8k_test.jsonl"), n=3, shuffle=False).build()
    assert len(sampler) == 1319 and not sampler.errors
    first = sampler.next_group()
    assert len(first) == 3 and len({id(s) for s in first}) == 3
    s = first[0]
    assert s.data_source == "openai/gsm8k" and s.reward_model["ground_truth"] == "18"
    assert s.message[0]["content"].endswith(" " + GSM8K_INSTRUCTION)
    assert s.group_id == "gsm8k_test-1" and s.status == Status.INIT
    # a sample writes only to itself
    first[0].extra_fields["x"] = 1
    first[0].reward_model["ground_truth"] = "changed"
    assert "x" not in first[1].extra_fields and first[1].reward_model["ground_truth"] == "18"


def test_verl_layout_jsonl_and_parquet(tmp_path: Path) -> None:
    rows = [verl(i) for i in range(4)] + [verl(9, uid="fixed", prompt="plain text prompt")]
    jsonl = write(tmp_path / "p.jsonl", rows)
    sampler = SamplerConfig(data_files=jsonl, shuffle=False).build()
    states = [g[0] for g in sampler.groups()]
    assert [s.reward_model["ground_truth"] for s in states] == ["0", "1", "2", "3", "9"]
    assert states[-1].group_id == "fixed" and states[-1].message == [
        {"role": "user", "content": "plain text prompt"}
    ]
    assert states[0].extra_fields["extra_info"] == {"index": 0}
    parquet = tmp_path / "p.parquet"
    write_rollouts(parquet, [s.model_copy(update={"response": ""}) for s in states])
    again = SamplerConfig(data_files=parquet, shuffle=False).build()
    assert [g[0].message for g in again.groups()] == [s.message for s in states]


def test_bad_rows_are_named_and_the_rest_go_on(tmp_path: Path) -> None:
    rows = [
        verl(0),
        "{not json",
        {"data_source": "toy", "reward_model": {"ground_truth": "1"}},
        verl(3, reward_model={"answer": "3"}),
        {"question": "q", "answer": "no final answer"},
        {"something": "else"},
        verl(6, prompt=[1, 2]),
        verl(7),
    ]
    sampler = SamplerConfig(data_files=write(tmp_path / "bad.jsonl", rows)).build()
    assert len(sampler) == 2
    messages = {e.row: e.message for e in sampler.errors}
    assert sorted(messages) == [2, 3, 4, 5, 6, 7]
    assert "not valid JSON" in messages[2]
    assert "missing column 'prompt'" in messages[3]
    assert "'reward_model'" in messages[4] and "ground_truth" in messages[4]
    assert "'answer'" in messages[5] and "####" in messages[5]
    assert "row_format='fields'" in messages[6]
    assert "'prompt'" in messages[7]
    assert all(m.startswith("bad.jsonl: ") for m in messages.values())


def test_field_mapping_for_other_layouts(tmp_path: Path) -> None:
    rows = [{"problem": "1 + 1?", "solution": "so the answer is: 2", "data_source": "mine"}, {"problem": "x"}]
    cfg = SamplerConfig(
        data_files=write(tmp_path / "f.jsonl", rows),
        row_format="fields",
        prompt_field="problem",
        answer_field="solution",
        answer_after="answer is:",
        instruction="Answer briefly.",
    )
    sampler = cfg.build()
    (group,) = list(sampler.groups())
    assert group[0].message[0]["content"] == "1 + 1? Answer briefly."
    assert group[0].reward_model["ground_truth"] == "2" and group[0].data_source == "mine"
    assert [e.message for e in sampler.errors] == ["f.jsonl: missing field 'solution'"]


def test_seeded_shuffle_epochs_and_limit(tmp_path: Path) -> None:
    path = write(tmp_path / "p.jsonl", [verl(i) for i in range(20)])
    order = lambda cfg: [g[0].group_id for g in cfg.build().groups()]  # noqa: E731
    a = order(SamplerConfig(data_files=path, seed=1, epochs=2))
    assert a == order(SamplerConfig(data_files=path, seed=1, epochs=2))
    assert a != order(SamplerConfig(data_files=path, seed=2, epochs=2))
    assert len(a) == 40 and len(set(a)) == 40  # epoch 2's groups are new groups
    assert sorted(a[:20]) == sorted(f"p-{i}" for i in range(1, 21)) and a[:20] != a[20:]
    assert all(g.endswith("@1") for g in a[20:])
    assert order(SamplerConfig(data_files=path, shuffle=False, limit=3)) == ["p-1", "p-2", "p-3"]
    endless = SamplerConfig(data_files=path, epochs=None, limit=2).build()
    assert len([endless.next_group() for _ in range(7)]) == 7


class CharTokenizer:
    """A tokenizer with a chat template: one token per character of the contents."""

    def apply_chat_template(self, messages: list[dict[str, Any]], **kw: Any) -> list[int]:
        assert kw == {"add_generation_prompt": True, "tokenize": True}
        return [ord(c) for m in messages for c in m["content"]]


def test_over_long_prompts_are_filtered(tmp_path: Path) -> None:
    rows = [verl(0, prompt="short"), verl(1, prompt="x" * 50)]
    path = write(tmp_path / "p.jsonl", rows)
    by_tokens = SamplerConfig(data_files=path, max_prompt_tokens=10).build(tokenizer=CharTokenizer())
    assert len(by_tokens) == 1 and by_tokens.filtered == 1
    assert by_tokens.prompts[0].prompt_ids == [ord(c) for c in "short"]
    by_chars = SamplerConfig(data_files=path, max_prompt_chars=10).build()
    assert len(by_chars) == 1 and by_chars.filtered == 1
    with pytest.raises(ValueError, match="max_prompt_tokens needs a tokenizer"):
        SamplerConfig(data_files=path, max_prompt_tokens=10).build()
    with pytest.raises(ValueError, match="data_files"):
        SamplerConfig(data_files=tmp_path / "missing.jsonl")


class BatchEncodingTokenizer(CharTokenizer):
    """transformers 5: ``apply_chat_template(tokenize=True)`` returns a BatchEncoding, a UserDict
    (not a dict) whose iteration yields its keys."""

    def apply_chat_template(self, messages: list[dict[str, Any]], **kw: Any) -> Any:
        ids = super().apply_chat_template(messages, **kw)
        return UserDict({"input_ids": ids, "attention_mask": [1] * len(ids)})


def test_a_batch_encoding_from_the_chat_template_gives_the_prompt_ids(tmp_path: Path) -> None:
    path = write(tmp_path / "p.jsonl", [verl(0, prompt="short"), verl(1, prompt="other")])
    sampler = SamplerConfig(data_files=path, max_prompt_tokens=10).build(tokenizer=BatchEncodingTokenizer())
    assert sampler.errors == []
    assert [s.prompt_ids for s in sampler.prompts] == [[ord(c) for c in "short"], [ord(c) for c in "other"]]
