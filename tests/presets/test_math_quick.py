"""MathJudger decides the answers that need no parser in the calling process: the same results as
the scorer on the pool, without the hand-off; everything else still goes to the pool's workers."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from judger import RolloutState, Status
from judger.presets.math import MathJudger, quick_math_result
from judger.scorers.math.order import asks_for_order
from judger.scorers.math.reward import compute_score, extract
from judger.trainer.io import example_data

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]


class RecordingPool:
    """A pool that runs the scorer in this process and records what it was handed."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    async def map(
        self, fn: Any, calls: list[tuple[tuple[Any, ...], dict[str, Any]]], timeout: float
    ) -> list[Any]:
        out: list[Any] = []
        for args, kwargs in calls:
            self.calls.append(args)
            try:
                out.append(fn(*args, **kwargs))
            except Exception as exc:
                out.append(exc)
        return out


def _judger(pool: RecordingPool) -> MathJudger:
    return MathJudger(
        "math", compute_score, {"compat": None}, execution="process", pool=pool, extra_info_fields=()
    )


def _state(response: str | None, gt: Any) -> RolloutState:
    return RolloutState(
        message=[{"role": "user", "content": "q"}], response=response, reward_model={"ground_truth": gt}
    )


def test_answers_decided_without_a_parser_are_not_handed_to_the_pool() -> None:
    pool = RecordingPool()
    cases = [
        ("so \\boxed{42}", "42"),  # the label's own text
        ("no box at all", "42"),  # no answer
        ("so \\boxed{41}", "42"),  # two different integers
        ("so \\boxed{\\frac{1}{2}}", "0.5"),  # needs the parser: the pool
        ("so \\boxed{1} and \\boxed{2}", "12"),  # a run of boxes may be a list: the pool
    ]
    states = [_state(r, gt) for r, gt in cases]
    asyncio.run(_judger(pool).batch_judge(states))
    assert [args[0] for args in pool.calls] == ["\\frac{1}{2}", "2"]
    for state, (response, gt) in zip(states, cases):
        assert state.status != Status.FAILED
        assert state.reward == compute_score(response, gt)


def test_a_missing_label_still_fails_with_the_scorers_reason() -> None:
    pool = RecordingPool()
    state = _state("so \\boxed{42}", None)
    asyncio.run(_judger(pool).batch_judge([state]))
    assert state.status == Status.FAILED and state.reward is None
    assert "ground truth is None" in (state.error_msg or "")
    assert len(pool.calls) == 1


def test_quick_results_agree_with_the_scorer_on_the_bundled_rollouts() -> None:
    rows = [json.loads(line) for line in example_data().read_text().splitlines() if line]
    decided = 0
    for row in rows:
        label = row["reward_model"]["ground_truth"]
        answer, boxes = extract(row["response"])
        kwargs: dict[str, Any] = {}
        if asks_for_order(row["prompt"]):
            kwargs["ordered"] = True
        if boxes:
            kwargs["boxes"] = boxes
        quick = quick_math_result(answer, label, {"extracted": True, **kwargs})
        if quick is not None:
            decided += 1
            assert quick == compute_score(answer, label, extracted=True, **kwargs)
            if "ordered" not in kwargs:
                assert quick == compute_score(row["response"], label)
    assert decided > len(rows) // 2  # the common case is decided here
