"""verl's per-sample managers call ``default_compute_score`` once per row: answers that need no
parser are decided in the calling process, with the verdicts the full grader gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judger.compat.verl import compute_score as module
from judger.compat.verl import default_compute_score
from judger.scorers.math import reward

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

DATA = Path(__file__).resolve().parents[2] / "src" / "judger" / "data" / "math_rollouts_dev.jsonl"


def _rows() -> list[dict]:
    return [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]


def test_inline_verdicts_equal_the_full_grader_on_real_responses() -> None:
    decided = 0
    for row in _rows():
        gold = row["reward_model"]["ground_truth"]
        answer, _ = reward.extract(row["response"])
        quick = reward.quick_result(answer, gold)
        if quick is None:
            continue
        decided += 1
        assert quick == reward.compute_score(row["response"], gold), (answer, gold)
    assert decided >= 200  # most real answers are the label's own text or another integer


def test_inline_decisions_skip_the_process_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = module.shared_pool

    def counting_pool():  # type: ignore[no-untyped-def]
        calls.append(1)
        return real()

    monkeypatch.setattr(module, "shared_pool", counting_pool)
    source = "DigitalLearningGmbH/MATH-lighteval"
    assert default_compute_score(source, "so \\boxed{42}.", "42")["score"] == 1.0
    assert default_compute_score(source, "so \\boxed{41}.", "42")["score"] == 0.0
    assert default_compute_score(source, "no box at all", "42")["score"] == 0.0
    assert calls == []
    # -0 and 0, 0.5 and 1/2: equal values in other forms still go to the full grader
    assert default_compute_score(source, "\\boxed{-0}", "0")["score"] == 1.0
    assert default_compute_score(source, "\\boxed{\\frac{1}{2}}", "0.5")["score"] == 1.0
    assert len(calls) == 2
