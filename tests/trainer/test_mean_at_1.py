"""The NumPy-free metrics of one sample per prompt group equal the full metrics, to the bit, or decline."""

from __future__ import annotations

import math
import random
from array import array
from typing import Any

import pytest

from judger.trainer.mean_at_1 import mean_at_1
from judger.trainer.metrics import process_validation_metrics

pytestmark = pytest.mark.py310


def _case(seed: int, n: int = 300) -> tuple[list[str], list[Any], dict[str, Any]]:
    rng = random.Random(seed)
    sources = [rng.choice(["openai/gsm8k", "math", "qa"]) for _ in range(n)]
    uids = [f"p{i}" for i in range(n)]
    score = [rng.choice([0.0, 1.0, 1.0]) for _ in range(n)]
    infos: dict[str, Any] = {
        "score": array("d", [math.nan if rng.random() < 0.1 else v for v in score]),  # NaN: missing
        "acc": [None if rng.random() < 0.1 else v == 1.0 for v in score],  # bools with None
        "pred": [rng.choice(["1", "2", None]) for _ in range(n)],  # text: no metric
        "steps": [rng.randint(-50, 50) for _ in range(n)],  # whole numbers
        "only_math": [rng.randint(0, 3) if ds == "math" else None for ds in sources],
        "never": [None] * n,
    }
    return sources, uids, infos


@pytest.mark.parametrize("seed", range(5))
def test_equals_the_full_metrics_to_the_bit(seed: int) -> None:
    sources, uids, infos = _case(seed)
    full = {k: list(v) if isinstance(v, array) else v for k, v in infos.items()}
    expected = process_validation_metrics(sources, uids, {k: _as_full(v) for k, v in full.items()})
    got = mean_at_1(sources, uids, infos)
    assert got == expected
    assert list(got) == list(expected)  # data_sources in the same order
    for ds in expected:
        assert list(got[ds]) == list(expected[ds])  # variables in the same order
    assert "pred" not in got["math"] and "never" not in got["math"]
    assert "only_math" in got["math"] and "only_math" not in got.get("qa", {})


def _as_full(values: list[Any]) -> list[Any]:
    # the full metrics read a missing float as None (NaN in a list of floats reads the same)
    return [None if isinstance(v, float) and math.isnan(v) else v for v in values]


def test_declines_a_group_of_several_samples() -> None:
    assert mean_at_1(["a", "a"], ["p", "p"], {"score": [1.0, 0.0]}) is None
    # the same uid in two data sources is two groups
    assert mean_at_1(["a", "b"], ["p", "p"], {"score": [1.0, 0.0]}) == {
        "a": {"score": {"mean@1": 1.0}},
        "b": {"score": {"mean@1": 0.0}},
    }


@pytest.mark.parametrize(
    "values",
    [
        [0.5, 1.0],  # fractional: summation order could change the last bit
        [float("inf"), 1.0],
        [2.0**60, 1.0],  # too large for every partial sum to be exact
        [1.0, {"x": 1}],  # a value only the full metrics can classify
        [None, float("nan")],  # NaN next to None
    ],
)
def test_declines_what_it_cannot_prove_exact(values: list[Any]) -> None:
    assert mean_at_1(["a", "a"], ["p", "q"], {"score": values}) is None


def test_declines_on_mismatched_lengths_and_unhashable_uids() -> None:
    assert mean_at_1(["a", "a"], ["p"], {"score": [1.0, 0.0]}) is None
    assert mean_at_1(["a"], [["p"]], {"score": [1.0]}) is None
