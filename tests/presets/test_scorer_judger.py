"""ScorerJudger, the base of the presets: dedup, per-sample isolation, independent outputs."""

from __future__ import annotations

from typing import Any

import pytest

from judger import RolloutState, Status
from judger.presets.base import ScorerJudger

pytestmark = pytest.mark.py310

CALLS: list[Any] = []


def picky(solution_str: str, ground_truth: Any, extra_info: Any = None, **options: Any) -> Any:
    CALLS.append(solution_str)
    if solution_str == "float":
        return 1.0  # not a reward dict
    if solution_str == "boom":
        raise ValueError("cannot parse")
    return {"score": float(solution_str == ground_truth), "acc": solution_str == ground_truth}


def state(response: str) -> RolloutState:
    return RolloutState(response=response, reward_model={"ground_truth": "1"})


async def test_bad_results_fail_alone_and_repeats_are_scored_once() -> None:
    CALLS.clear()
    judger = ScorerJudger("picky", picky)
    out = await judger.batch_judge([state("1"), state("float"), state("boom"), state("1"), state("2")])
    assert sorted(CALLS) == ["1", "2", "boom", "float"]  # the repeated "1" is scored once
    assert [s.status for s in out] == [Status.INIT, Status.FAILED, Status.FAILED, Status.INIT, Status.INIT]
    assert "must return a dict" in out[1].error_msg and out[2].error_msg == "ValueError: cannot parse"
    assert out[0].reward == out[3].reward == {"score": 1.0, "acc": True}
    out[0].reward["extra"] = True  # deduplicated samples still own separate reward dicts
    assert "extra" not in out[3].reward
