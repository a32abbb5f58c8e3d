"""SparseLog: a per-sample warning a policy could multiply is logged at the first few occurrences,
then at powers of two, always with the count so far."""

from __future__ import annotations

import pytest

from judger.core.sparse_log import SparseLog

pytestmark = pytest.mark.py310


def test_first_few_then_powers_of_two() -> None:
    sparse = SparseLog(first=3)
    logged = [n for n in (sparse.tick() for _ in range(100)) if n is not None]
    assert logged == [1, 2, 3, 4, 8, 16, 32, 64]
    assert sparse.count == 100
