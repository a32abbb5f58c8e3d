"""maj@k over groups alike in pattern and values is computed once: the same bits as row by row."""

from __future__ import annotations

import numpy as np
import pytest

from judger.trainer.metrics import _maj_mean_std, _maj_mean_std_rows, _maj_plan

pytestmark = pytest.mark.py310


@pytest.mark.parametrize("levels", [(0.0, 1.0), (-1.0, 0.5, 1.0), None])
def test_maj_mean_std_is_row_by_row_bit_for_bit(levels: tuple[float, ...] | None) -> None:
    rng = np.random.default_rng(3)
    g, n, k = 5000, 4, 3
    codes = rng.integers(0, 3, size=(g, n))
    values = rng.choice(levels, size=(g, n)) if levels else rng.normal(size=(g, n))
    idx = np.random.RandomState(42).randint(0, n, size=(1000, k))
    plan = _maj_plan(codes, idx)
    mean, std = _maj_mean_std(values, plan)
    ref_mean, ref_std = _maj_mean_std_rows(values, plan)
    assert mean.tobytes() == ref_mean.tobytes() and std.tobytes() == ref_std.tobytes()
