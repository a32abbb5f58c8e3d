"""Search-R1 QA exact match: verl's values in compat mode (golden cases scored by verl 0.9.1's own
``search_r1_like_qa_em.py``), more label shapes in the default mode, and the judger."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from judger import QAExactMatchJudgerConfig, RolloutState, Status
from judger.scorers.qa import compute_score, extract_solution, normalize_answer

pytestmark = pytest.mark.py310

GOLDEN = [json.loads(line) for line in (Path(__file__).parent / "data" / "qa_verl_golden.jsonl").open()]


@pytest.mark.parametrize("compat", ["verl", None])
def test_both_modes_equal_verl_on_golden_cases(compat: str | None) -> None:
    for row in GOLDEN:
        out = compute_score(row["response"], row["ground_truth"], compat=compat)
        assert out["score"] == row["verl"], row
        assert out["pred"] == row["verl_pred"], row
        assert out["acc"] is (out["score"] > 0), row
        scaled = compute_score(
            row["response"], row["ground_truth"], compat=compat, format_score=0.2, score=2.0
        )
        assert scaled["score"] == row["verl_fs"], row


def test_normalisation() -> None:
    assert normalize_answer("The  Beatles!") == "beatles"
    assert normalize_answer("An Apple, a day") == "apple day"
    assert normalize_answer("U.S.A.") == "usa"
    assert extract_solution("<answer>a</answer> then <answer>\n b \n</answer>") == "b"
    assert extract_solution("<answer>unclosed") is None


def test_tag_spam_is_divided_by_four() -> None:
    assert compute_score("<answer>ok</answer>" * 10, ["ok"])["score"] == 1.0
    spam = compute_score("<answer>ok</answer>" * 11, ["ok"])
    assert spam == {"score": 0.25, "acc": True, "pred": "ok"}


@pytest.mark.parametrize(
    "label",
    [{"target": ["Paris", "paris, france"]}, ["Paris"], "Paris", ("paris",), np.array(["Paris", "Lyon"])],
)
def test_default_mode_accepts_every_label_shape(label: object) -> None:
    assert compute_score("<answer>paris</answer>", label)["acc"] is True
    assert compute_score("<answer>Rome</answer>", label) == {"score": 0.0, "acc": False, "pred": "Rome"}


def test_parquet_style_numpy_targets_work_in_compat_mode_too() -> None:
    label = {"target": np.array(["Paris", "Lyon"], dtype=object)}
    assert compute_score("<answer>lyon</answer>", label, compat="verl")["score"] == 1.0


def test_compat_mode_keeps_verls_label_contract() -> None:
    with pytest.raises(TypeError):
        compute_score("<answer>Paris</answer>", "Paris", compat="verl")  # verl indexes ['target']
    # no answer: verl returns before reading the label, and so do we
    assert compute_score("no tags", "anything", compat="verl")["score"] == 0.0


def test_numbers_as_targets_in_default_mode() -> None:
    assert compute_score("<answer>1969</answer>", {"target": [1969]})["acc"] is True
    with pytest.raises(KeyError, match="target"):
        compute_score("<answer>1969</answer>", {"answers": ["1969"]})


async def test_judger_batch_and_failures() -> None:
    judger = QAExactMatchJudgerConfig().build()
    states = [
        RolloutState(
            response="<answer>Beatles</answer>", reward_model={"ground_truth": {"target": ["The Beatles"]}}
        ),
        RolloutState(
            response="<answer>Stones</answer>", reward_model={"ground_truth": {"target": ["The Beatles"]}}
        ),
        RolloutState(response="<answer>x</answer>", reward_model={"ground_truth": {"wrong": 1}}),
        RolloutState(response="nothing", reward_model={"ground_truth": ["x"]}),
    ]
    singles = [await judger.judge(s.model_copy(deep=True)) for s in states]
    batched = await judger.batch_judge(states)
    assert [s.reward for s in batched] == [s.reward for s in singles]
    assert [s.reward["score"] if s.reward else None for s in batched] == [1.0, 0.0, None, 0.0]
    assert batched[2].status == Status.FAILED and "target" in (batched[2].error_msg or "")


def test_config() -> None:
    config = QAExactMatchJudgerConfig(score=2.0, format_score=0.1)
    assert config.execution == "inline"
    assert config.scorer_options() == {"compat": None, "format_score": 0.1, "score": 2.0}
