"""judger as a ROLL reward worker (8eb27cc; not on the package registry: its ``roll`` there is another
project), made and called as ROLL's source does it.

ROLL's ``Worker`` base starts Ray named actors and ports for distributed training, which need
ROLL: stand-in modules give the worker class what it reads of them (``worker_config``,
``rank_info``, the ``register`` decorator, ``Dispatch``, the tokenizer provider), and ROLL's
``DataProto`` -- a fork of verl's (``roll/distributed/scheduler/protocol.py`` 1-2, 153, 396) -- is
verl's, installed here."""

from __future__ import annotations

import enum
import sys
import types
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from judger.compat import roll

pytestmark = pytest.mark.slow


@pytest.fixture
def roll_modules(monkeypatch: pytest.MonkeyPatch, tokenizer: Any) -> Iterator[dict[str, Any]]:
    from verl import DataProto

    registered: dict[str, Any] = {}

    class Worker:  # what a subclass reads of ``roll/distributed/executor/worker.py`` 47-80
        def __init__(self, worker_config: Any) -> None:
            self.worker_config = worker_config
            self.rank_info = types.SimpleNamespace(rank=0, world_size=1, dp_rank=0, dp_size=1)

    Dispatch = enum.Enum("Dispatch", ["ONE_TO_ALL", "DP_MP_COMPUTE", "ALL_TO_ALL"])

    def register(dispatch_mode: Any = None, clear_cache: bool = True, **_: Any) -> Any:
        def mark(fn: Any) -> Any:
            registered[fn.__name__] = (dispatch_mode, clear_cache)
            return fn

        return mark

    modules = {
        "roll": {},
        "roll.distributed": {},
        "roll.distributed.executor": {},
        "roll.distributed.executor.worker": {"Worker": Worker},
        "roll.distributed.scheduler": {},
        "roll.distributed.scheduler.decorator": {"Dispatch": Dispatch, "register": register},
        "roll.distributed.scheduler.protocol": {"DataProto": DataProto},
        "roll.models": {},
        "roll.models.model_providers": {"default_tokenizer_provider": lambda model_args: tokenizer},
    }
    for name, attrs in modules.items():
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, module)
    roll.__dict__.pop("JudgerRewardWorker", None)
    yield {"registered": registered, "Dispatch": Dispatch, "DataProto": DataProto}
    roll.__dict__.pop("JudgerRewardWorker", None)  # made over the stand-ins: not ROLL's


def request(tokenizer: Any, data_proto: Any, responses: list[str], labels: list[Any]) -> Any:
    """What ``generate_scheduler.py`` 970-993 hands ``compute_rewards``: a DataProto of the prompt and
    response token ids (right-padded), the ``ground_truth`` and ``tag`` columns, and its ``rollout_id``."""
    import torch

    def padded(texts: list[str], extra: list[int]) -> Any:
        rows = [tokenizer.encode(t) + extra for t in texts]
        width = max(len(r) for r in rows)
        return torch.tensor([r + [tokenizer.pad_token_id] * (width - len(r)) for r in rows])

    prompts = padded(["6 x 7?"] * len(responses), [])
    return data_proto.from_dict(
        tensors={"prompts": prompts, "responses": padded(responses, [tokenizer.eos_token_id])},
        non_tensors={
            "ground_truth": np.array(labels, dtype=object),
            "tag": np.array(["math"] * len(labels), dtype=object),
            "rollout_id": np.array([str(i) for i in range(len(labels))], dtype=object),
        },
    )


def test_worker_cls_returns_the_three_tensors_rolls_rule_workers_return(
    roll_modules: dict[str, Any], tokenizer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``worker_cls: judger.compat.roll.JudgerRewardWorker`` is imported by name, made with the
    domain's worker config, and its ``compute_rewards`` returns ``token_level_rewards``,
    ``response_level_rewards`` and ``scores`` (``math_rule_reward_worker.py`` 260-324)."""
    import importlib

    import torch

    monkeypatch.setenv("JUDGER_CONFIG", "dapomath")  # from the domain's system_envs
    cls = importlib.import_module("judger.compat.roll").JudgerRewardWorker
    assert cls.__module__ == "judger.compat.roll" and roll.JudgerRewardWorker is cls
    dispatch = roll_modules["Dispatch"]
    assert roll_modules["registered"]["compute_rewards"] == (dispatch.DP_MP_COMPUTE, False)
    assert roll_modules["registered"]["initialize"][0] == dispatch.ONE_TO_ALL
    worker = cls(types.SimpleNamespace(model_args=None))
    data = request(
        tokenizer, roll_modules["DataProto"], ["Answer: 42", "Answer: 41", "Answer: 42"], ["42", "42", None]
    )
    out = worker.compute_rewards(data)
    assert set(out.batch.keys()) == set(roll.OUTPUT_KEYS)
    # the third sample has no label: DAPO's lowest score, -1, never an exception that stops the job
    assert out.batch["response_level_rewards"].tolist() == [1.0, -1.0, -1.0]
    assert out.batch["scores"].tolist() == [1.0, -1.0, -1.0]
    assert out.batch["token_level_rewards"].shape == data.batch["responses"].shape
    assert torch.count_nonzero(out.batch["token_level_rewards"]) == 0
    # the response's tokens, padding and end token dropped by the mask-free path: DAPO reads "42"
    states = worker.judger_rewards.states(data.batch, data.non_tensor_batch)
    assert states[0].response == "Answer: 42"
    assert states[0].response_ids == [*tokenizer.encode("Answer: 42"), tokenizer.eos_token_id]


def test_without_roll_the_worker_says_what_it_needs() -> None:
    with pytest.raises(ImportError, match="needs ROLL installed"):
        roll.__getattr__("JudgerRewardWorker")


def test_a_missing_label_column_fails_the_samples_not_the_job(
    roll_modules: dict[str, Any], tokenizer: Any
) -> None:
    rewards = roll.JudgerRewards(tokenizer, "dapomath")
    data = request(tokenizer, roll_modules["DataProto"], ["Answer: 42"], ["42"])
    data.non_tensor_batch.pop("ground_truth")
    assert rewards.tensors(data)["scores"].tolist() == [-1.0]
