"""judger's verl managers on torch-free batches: token-level arrays, extra info union, DAPO penalty,
judgers inside."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import numpy as np
import pytest

from judger import JudgerConfig
from judger.compat.verl.managers import BatchRewardManager, DAPORewardManager, NaiveRewardManager
from judger.compat.verl.reward_managers import RewardBatch

ALL_KEYS = {"reward_extra_keys": None}  # every key the scorer returns, as the torch-free managers kept

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]


def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: Any = None, **kw: Any):
    # different return shapes and keys per sample, as real scorers mix them
    if solution_str == "tuple":
        return (0.25, "ignored")
    if solution_str == "int":
        return 1
    acc = solution_str.strip() == ground_truth
    out: dict[str, Any] = {"score": 1.0 if acc else -1.0, "acc": acc}
    if acc:
        out["pred"] = solution_str.strip()
    if kw.get("bonus"):
        out["score"] += kw["bonus"]
    return out


def batch(**kw: Any) -> RewardBatch:
    base: dict[str, Any] = {
        "data_sources": ["a", "a", "b", "b"],
        "responses": ["7", "8", "tuple", "int"],
        "ground_truths": ["7", "7", "x", "x"],
        "valid_response_lengths": [3, 1, 5, 2],
        "response_length": 6,
    }
    base.update(kw)
    return RewardBatch(**base)


def test_naive_places_score_at_last_valid_token() -> None:
    out = NaiveRewardManager(compute_score=compute_score, **ALL_KEYS)(batch(), return_dict=True)
    tensor = out["reward_tensor"]
    assert tensor.shape == (4, 6) and tensor.dtype == np.float32
    expected = np.zeros((4, 6), dtype=np.float32)
    expected[0, 2], expected[1, 0], expected[2, 4], expected[3, 1] = 1.0, -1.0, 0.25, 1.0
    assert (tensor == expected).all()
    info = out["reward_extra_info"]
    # union of keys: samples without a key get None instead of raising KeyError; a float result is
    # also its acc, as verl records it
    assert info == {
        "score": [1.0, -1.0, 0.25, 1.0],
        "acc": [True, False, 0.25, 1.0],
        "pred": ["7", None, None, None],
        "judge_failure": [None, None, None, None],
    }
    default = NaiveRewardManager(compute_score=compute_score)(batch(), return_dict=True)
    assert list(default["reward_extra_info"]) == ["score", "acc", "pred", "judge_failure"]


def test_reward_kwargs_width_default_and_zero_length() -> None:
    manager = NaiveRewardManager(compute_score=functools.partial(compute_score, bonus=0.5))
    tensor = manager(batch(valid_response_lengths=[2, 0, 1, 1], response_length=None))
    assert tensor.shape == (4, 2)
    assert tensor[0, 1] == 1.5 and tensor[1].sum() == 0.0  # an empty response carries no reward


def test_mapping_input_in_verl_field_names_and_tokenizer_decoding() -> None:
    class Tok:
        eos_token = "</s>"

        def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
            return "".join(chr(i) for i in ids)

    data = {
        "data_source": ["a", "a"],
        "reward_model": [{"ground_truth": "7"}, {"ground_truth": "7"}],
        "response_ids": [[ord("7"), 0, 0], [ord("1"), ord("7"), 0]],
        "valid_response_lengths": [1, 2],
    }
    tensor = NaiveRewardManager(Tok(), compute_score=compute_score)(data)
    assert tensor[0, 0] == 1.0 and tensor[1, 1] == -1.0
    with pytest.raises(KeyError, match="unknown reward batch keys"):
        NaiveRewardManager(compute_score=compute_score)({**data, "bogus": 1})


def test_repeated_rows_are_decoded_once_each_in_place() -> None:
    from judger.compat.verl.reward_managers import decode_all

    class Tok:
        def __init__(self) -> None:
            self.calls: list[list[int]] = []

        def decode(self, ids: Any, skip_special_tokens: bool = True) -> str:
            self.calls.append(list(ids))
            return "".join(chr(int(i)) for i in ids)

    array = np.array([[72, 105, 0], [72, 105, 33], [72, 105, 0], [72, 105, 33], [72, 0, 0]], dtype=np.int64)
    lengths = [2, 3, 2, 3, 2]
    rows = [array[i, :n] for i, n in enumerate(lengths)]
    tok = Tok()
    assert decode_all(tok, rows) == ["Hi", "Hi!", "Hi", "Hi!", "H\x00"]
    assert tok.calls == [[72, 105], [72, 105, 33], [72, 0]]  # each distinct row once, in order
    tok = Tok()
    assert decode_all(tok, [[1, 2], [1, 2], [2, 1]]) == ["\x01\x02", "\x01\x02", "\x02\x01"]
    assert len(tok.calls) == 2
    tok = Tok()
    distinct = [array[0, :1], array[0, :2], array[1, :3]]  # prefixes of one another: not equal
    assert decode_all(tok, distinct) == ["H", "Hi", "Hi!"] and len(tok.calls) == 3


def test_batch_manager_calls_once_with_lists() -> None:
    calls: list[tuple] = []

    def batch_score(data_sources, solution_strs, ground_truths, extra_infos, **kw):
        calls.append((list(data_sources), list(solution_strs)))
        return [
            {"score": float(s == g), "len": len(s)} if i % 2 else 0.5
            for i, (s, g) in enumerate(zip(solution_strs, ground_truths))
        ]

    out = BatchRewardManager(compute_score=batch_score, **ALL_KEYS)(batch(), return_dict=True)
    assert len(calls) == 1 and calls[0][1] == ["7", "8", "tuple", "int"]
    assert out["reward_tensor"][:, :].sum() == pytest.approx(0.5 + 0.0 + 0.5 + 0.0)
    assert out["reward_extra_info"]["len"] == [None, 1, None, 3]

    def short(data_sources, solution_strs, ground_truths, extra_infos, **kw):
        return [1.0]

    # a batch scorer that loses samples: each one FAILED with a reason, never a silent 0
    out = BatchRewardManager(compute_score=short, failure_score=-1.0)(batch(), return_dict=True)
    assert out["reward_extra_info"]["judge_failure"] == ["error"] * 4
    assert out["reward_tensor"].sum() == -4.0


def test_dapo_strips_eos_and_penalises_overlong() -> None:
    seen: list[str] = []

    def score(data_source, solution_str, ground_truth, extra_info=None, **kw):
        seen.append(solution_str)
        return {"score": 1.0 if solution_str == ground_truth else -1.0}

    class Tok:
        eos_token = "<eos>"

        def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
            raise AssertionError("the batch holds decoded responses")

    manager = DAPORewardManager(
        Tok(),
        compute_score=score,
        max_resp_len=20,
        overlong_buffer_cfg={"enable": True, "len": 8, "penalty_factor": 1.0, "log": True},
    )
    b = RewardBatch(
        data_sources=["m", "m", "m"],
        responses=["42<eos>", "42", "41<eos>"],
        ground_truths=["42", "42", "42"],
        valid_response_lengths=[10, 16, 20],
        response_length=20,
    )
    out = manager(b, return_dict=True)
    assert sorted(seen) == ["41", "42", "42"]  # one trailing eos stripped; sync scorers run on threads
    # expected length 20 - 8 = 12: lengths 16 and 20 exceed it by 4 and 8
    assert out["reward_tensor"][0, 9] == 1.0
    assert out["reward_tensor"][1, 15] == pytest.approx(1.0 - 4 / 8)
    assert out["reward_tensor"][2, 19] == pytest.approx(-1.0 - 1.0)
    assert out["reward_extra_info"]["overlong"] == [False, True, True]
    assert out["reward_extra_info"]["overlong_reward"] == pytest.approx([0.0, -0.5, -1.0])
    with pytest.raises(ValueError, match="needs max_resp_len"):
        DAPORewardManager(compute_score=score, overlong_buffer_cfg={"enable": True, "len": 4})


def test_judger_config_inside_isolates_failures() -> None:
    config = JudgerConfig(judger_name="em", reward_handler="judger.testing.handlers:exact_match")
    manager = NaiveRewardManager(compute_score=config)
    b = batch(responses=["7", "8", "x", None])
    out = manager(b, return_dict=True)
    assert out["reward_tensor"][0, 2] == 1.0 and out["reward_tensor"][1, 0] == 0.0
    assert out["reward_extra_info"]["judge_failure"] == [None, None, None, None]
    assert out["reward_extra_info"]["pred"][:3] == ["7", "8", "x"]

    def boom(response, label, extra_info):
        if response == "8":
            raise RuntimeError("scorer crashed")
        return {"score": 1.0}

    out = NaiveRewardManager(judger=JudgerConfig(judger_name="boom", reward_handler=boom).build())(
        batch(), return_dict=True
    )
    assert out["reward_extra_info"]["judge_failure"] == [None, "error", None, None]
    assert out["reward_tensor"][1].sum() == 0.0 and out["reward_tensor"][0, 2] == 1.0


async def test_usable_from_inside_a_running_event_loop() -> None:
    config = JudgerConfig(judger_name="em", reward_handler="judger.testing.handlers:exact_match")
    tensor = NaiveRewardManager(compute_score=config)(batch())
    await asyncio.sleep(0)
    assert tensor[0, 2] == 1.0


def test_torch_only_when_asked_and_installed() -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="needs torch"):
            NaiveRewardManager(compute_score=compute_score, tensor="torch")
    else:
        assert (
            type(NaiveRewardManager(compute_score=compute_score, tensor="torch")(batch())).__name__
            == "Tensor"
        )
    with pytest.raises(ValueError):
        NaiveRewardManager(compute_score=compute_score, tensor="jax")


def test_examine_prints_per_data_source() -> None:
    lines: list[str] = []
    NaiveRewardManager(compute_score=compute_score, num_examine=1, printer=lines.append)(
        batch(prompts=["p0", "p1", "p2", "p3"])
    )
    assert lines == [
        "[prompt] p0",
        "[response] 7",
        "[ground_truth] 7",
        "[score] 1.0",
        "[prompt] p2",
        "[response] tuple",
        "[ground_truth] x",
        "[score] 0.25",
    ]
