"""MathJudgerConfig on 400 real MATH responses, against the reference grader and our reviewed verdicts.

The reference grader (Qwen2.5-Math's evaluation) is not ground truth: every row where we disagree
with it was read by hand and recorded in ``data/math_dev_reviewed.jsonl`` with a verdict
(``"ours"``: our judgement is right; ``"reference"``: the reference is right and we are wrong).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judger import RolloutState
from judger.presets.math import MathJudgerConfig
from judger.trainer.io import example_data

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

DEV = example_data("math_rollouts_dev.jsonl")
REVIEWED = Path(__file__).parent / "data" / "math_dev_reviewed.jsonl"


def load(path: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def rows() -> list[dict]:  # type: ignore[type-arg]
    return load(DEV)


def states(rows: list[dict]) -> list[RolloutState]:  # type: ignore[type-arg]
    return [
        RolloutState(message=r["prompt"], response=r["response"], reward_model=r["reward_model"])
        for r in rows
    ]


async def test_every_disagreement_with_the_reference_grader_is_reviewed(rows: list[dict]) -> None:  # type: ignore[type-arg]
    reviewed = {r["index"]: r for r in load(REVIEWED)}
    out = await MathJudgerConfig().build().batch_judge(states(rows))
    assert all(s.reward is not None for s in out), [s.error_msg for s in out if s.reward is None][:3]
    disagreements = {
        i for i, (s, r) in enumerate(zip(out, rows)) if s.reward["acc"] != r["reference_grader"]["correct"]
    }
    # no unreviewed disagreement, and no stale review
    assert disagreements == set(reviewed)
    for i, review in reviewed.items():
        ours = out[i].reward
        assert review["ground_truth"] == rows[i]["reward_model"]["ground_truth"]
        assert review["pred"] == ours["pred"]
        if review["verdict"] == "ours":
            assert (
                ours["acc"] is review["ours"]["acc"]
                and ours["acc"] is not review["reference_grader"]["correct"]
            )
    agreement = 1 - len(disagreements) / len(rows)
    assert agreement >= 0.97, agreement


async def test_verl_mode_keeps_verls_verdicts_on_the_reviewed_rows(rows: list[dict]) -> None:  # type: ignore[type-arg]
    reviewed = load(REVIEWED)
    out = (
        await MathJudgerConfig(compat="verl")
        .build()
        .batch_judge(states([rows[r["index"]] for r in reviewed]))
    )
    # verl's string comparison misses these correct answers, exactly as verl does
    assert [s.reward["acc"] for s in out] == [False] * len(reviewed)
