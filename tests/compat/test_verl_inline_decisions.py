"""verl's per-sample managers call ``default_compute_score`` once per row: answers that need no
parser are decided in the calling process, with the verdicts the full grader gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from judger.compat.verl import compute_score as module
from judger.compat.verl import default_compute_score
from judger.runtime.procpool import shared
from judger.scorers.math import reward

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "src" / "judger" / "data" / "math_rollouts_dev.jsonl"
CASES = [
    ROOT / "bench" / "grading" / "public_cases.jsonl",
    ROOT / "bench" / "grading" / "judger_categories.jsonl",
    ROOT / "tests" / "presets" / "data" / "math_dev_reviewed.jsonl",
]
MATH = "DigitalLearningGmbH/MATH-lighteval"


def _rows(path: Path = DATA) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_inline_verdicts_equal_the_full_grader_on_real_responses() -> None:
    decided = 0
    rows = _rows()
    for row in rows:
        gold = row["reward_model"]["ground_truth"]
        answer, _ = reward.extract(row["response"])
        quick = reward.quick_result(answer, gold)
        if quick is None:
            continue
        decided += 1
        assert quick == reward.compute_score(row["response"], gold), (answer, gold)
    # fractions, degrees, units, money, mixed numbers and clock times need no parser either
    assert decided >= 0.95 * len(rows)


def test_inline_verdicts_equal_the_full_grader_on_the_grading_cases() -> None:
    decided = 0
    for path in CASES:
        for case in _rows(path):
            gold = case.get("gold", case.get("ground_truth"))
            if "pred" in case:
                answer, boxes, expected = (
                    case["pred"],
                    None,
                    reward.compute_score(case["pred"], gold, extracted=True),
                )
            else:
                answer, boxes = reward.extract(case["response"])
                expected = reward.compute_score(case["response"], gold)
            quick = reward.quick_result(answer, gold)
            if quick is None or not (quick["acc"] or not boxes):  # what default_compute_score trusts
                continue
            decided += 1
            assert quick == expected, (path.name, answer, gold)
    assert decided >= 100


def test_default_compute_score_equals_the_pool_row_by_row() -> None:
    rows = _rows()
    calls = []
    for row in rows:
        answer, boxes = reward.extract(row["response"])
        gold = row["reward_model"]["ground_truth"]
        calls.append(((answer, gold, row["extra_info"]), {"extracted": True, "boxes": boxes}))
    on_pool = shared.shared_pool().map_sync(reward.compute_score, calls, timeout=30)
    for row, expected in zip(rows, on_pool, strict=True):
        got = default_compute_score(MATH, row["response"], row["reward_model"]["ground_truth"])
        assert dict(got) == expected, row["response"][-200:]


class _CountingPool:
    def __init__(self, pool: Any) -> None:
        self.pool = pool
        self.runs = 0

    @property
    def started(self) -> bool:
        return self.pool.started

    def start(self) -> None:
        self.pool.start()

    def run_sync(self, *args: Any, **kwargs: Any) -> Any:
        self.runs += 1
        return self.pool.run_sync(*args, **kwargs)


def test_inline_decisions_skip_the_process_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    counting = _CountingPool(shared.shared_pool())
    monkeypatch.setattr(module, "shared_pool", lambda: counting)
    inline = [
        ("so \\boxed{42}.", "42", 1.0),
        ("so \\boxed{41}.", "42", 0.0),
        ("no box at all", "42", 0.0),
        ("\\boxed{-0}", "0", 1.0),
        ("\\boxed{\\frac{1}{2}}", "0.5", 1.0),
        ("\\boxed{\\frac{1}{9}}", "\\dfrac{1}{9}", 1.0),
        ("\\boxed{48}", "48^\\circ", 1.0),
        ("\\boxed{12 \\frac{3}{5}}", "12\\frac{3}{5}", 1.0),
        ("\\boxed{6}", "\\$6", 1.0),
        ("\\boxed{198}", "198\\%", 1.0),
        ("\\boxed{4:30 \\text{ p.m.}}", "\\text{4:30 p.m.}", 1.0),
        ("\\boxed{\\frac{5}{16}}", "\\frac{3}{8}", 0.0),
        ("\\boxed{5 \\text{ km}}", "5 \\text{ m}", 0.0),
    ]
    for response, gold, score in inline:
        assert default_compute_score(MATH, response, gold)["score"] == score, (response, gold)
    assert counting.runs == 0
    # what needs a parser, a power tower, and text past the inline bound go to the full grader
    parsed = [
        ("\\boxed{\\frac{\\pi}{2}}", "\\pi/2", 1.0),
        ("\\boxed{2^{2^{3}}}", "256", 1.0),
        ("\\boxed{\\frac{" + "3" * 60 + "}{" + "3" * 60 + "}}", "1", 1.0),
    ]
    for response, gold, score in parsed:
        assert default_compute_score(MATH, response, gold)["score"] == score, (response, gold)
    assert counting.runs == len(parsed)


def test_the_first_call_starts_the_pool_in_the_background() -> None:
    # spawned workers import Math-Verify and warm its parser: seconds, during which the call returns
    shared.configure_shared_pool(start_method="spawn")
    try:
        assert default_compute_score(MATH, "so \\boxed{42}.", "42")["score"] == 1.0
        pool = shared._shared
        assert pool is not None and pool.started  # asked for by the call, which did not wait for it
        assert pool.stats()["max_worker_start_s"] is None  # no worker was ready when the call returned
        assert pool.run_sync(reward.compute_score, "\\frac{\\pi}{2}", "\\pi/2", extracted=True)["acc"]
    finally:
        shared.configure_shared_pool()
