"""verl's per-sample ``default_compute_score`` on a code row gives the sample ``timeout`` seconds, as
the code judger does: its tests share all but a margin of it, and a program that hangs costs that,
not ten seconds per test (minutes per sample on a 100-test problem, in verl's sequential manager).
"""

from __future__ import annotations

import time

import pytest

from judger.compat.verl import default_compute_score
from judger.runtime.sandbox import bwrap

pytestmark = [
    pytest.mark.py310,
    pytest.mark.clients_env,
    pytest.mark.skipif(bool(bwrap.probe()), reason=f"bubblewrap unavailable: {bwrap.probe()}"),
]

TESTS = {"inputs": ["1", "2", "3"], "outputs": ["2", "4", "6"]}


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def test_a_hanging_program_costs_its_sample_the_timeout_not_ten_seconds_a_test() -> None:
    started = time.monotonic()
    out = default_compute_score(
        "codecontests", fenced("import time\ntime.sleep(60)"), TESTS, timeout=2, full_output=True
    )
    elapsed = time.monotonic() - started
    assert out["score"] == 0.0 and out["error"].startswith("timeout: the sample's time budget of 1.5 s"), out
    assert elapsed < 10, f"{elapsed:.1f} s for a sample with timeout=2"
    honest = fenced("print(2 * int(input()))")
    assert default_compute_score("codecontests", honest, TESTS, timeout=2) == {
        "score": 1.0,
        "acc": True,
        "pred": "print(2 * int(input()))\n",
    }
    assert default_compute_score("codecontests", honest, TESTS)["score"] == 1.0  # the judger's 300 s


def test_a_program_slow_on_every_test_scores_its_timeouts() -> None:
    # each test within the per-test wall time, all of them together past the sample's timeout
    slow = fenced("import time\ntime.sleep(0.8)\nprint(2 * int(input()))")
    out = default_compute_score("codecontests", slow, TESTS, timeout=2, full_output=True)
    assert out["score"] < 1.0 and "time budget" in out["error"], out
