"""Every verl calling convention judges its rows through one core (``batch.score_rows``): a manager
grades a row as ``default_compute_score`` and its batch form do, the prompt included."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from judger.compat.verl import default_compute_score, default_compute_score_batch
from judger.compat.verl.managers import BatchRewardManager, DAPORewardManager, NaiveRewardManager
from judger.compat.verl.reward_managers import RewardBatch

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

MATH = "DigitalLearningGmbH/MATH-lighteval"
# (response, label, question): the question changes the verdict (a rounding asked for, an
# unsimplified fraction where the question asks to simplify)
CASES = [
    ("\\boxed{2.83}", "2\\sqrt{2}", "What is $\\sqrt{8}$ to the nearest hundredth?"),
    ("\\boxed{\\frac{8}{22}}", "\\frac{4}{11}", "Simplify $\\frac{8}{22}$."),
]
ROWS = [(response, label, extra) for response, label, q in CASES for extra in ({"question": q}, {})]


def expected() -> list[float]:
    single = [default_compute_score(MATH, r, label, extra)["score"] for r, label, extra in ROWS]
    batch = default_compute_score_batch(
        [MATH] * len(ROWS), [r for r, _, _ in ROWS], [label for _, label, _ in ROWS], [e for _, _, e in ROWS]
    )
    assert [b["score"] for b in batch] == single
    assert single == [1.0, 0.0, 0.0, 1.0]  # the question decides each pair
    return single


@pytest.mark.parametrize("cls", [NaiveRewardManager, BatchRewardManager, DAPORewardManager])
def test_a_torch_free_batch_reads_the_question_as_default_compute_score_does(cls: type) -> None:
    batch = RewardBatch(
        data_sources=[MATH] * len(ROWS),
        responses=[r for r, _, _ in ROWS],
        ground_truths=[label for _, label, _ in ROWS],
        extra_infos=[extra for _, _, extra in ROWS],
        valid_response_lengths=[1] * len(ROWS),
    )
    tensor = cls()(batch)
    assert tensor[:, 0].tolist() == expected()


class _Item:
    """One sample of verl's reward loop, its response one token a character."""

    def __init__(self, response: str, label: str, extra: dict[str, Any]) -> None:
        ids = np.array([ord(c) for c in response])
        self.batch = {"responses": ids, "attention_mask": np.ones(len(ids) + 1, dtype=np.int64)}
        self.non_tensor_batch = {
            "data_source": MATH,
            "reward_model": {"ground_truth": label},
            "extra_info": extra,
        }

    def __getitem__(self, key: Any) -> _Item:
        return self


class _Chars:
    def decode(self, ids: Any, skip_special_tokens: bool = True) -> str:
        return "".join(chr(int(i)) for i in ids)


def test_the_reward_loop_reads_the_question_as_default_compute_score_does() -> None:
    manager = NaiveRewardManager(config={}, tokenizer=_Chars(), compute_score=None)

    async def chunk() -> list[dict[str, Any]]:
        return await asyncio.gather(*(manager.run_single(_Item(*row)) for row in ROWS))

    assert [out["reward_score"] for out in asyncio.run(chunk())] == expected()
