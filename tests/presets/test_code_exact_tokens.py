"""Stdin/stdout comparison: tolerance only where the expected token is a decimal number; an integer
answer is compared exactly, as LiveCodeBench's checker compares them (as exact
decimals), unlike APPS / verl ``prime_code``'s ``np.allclose`` fallback, which takes ``1e9`` for
``1000000006``."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from judger import CodeJudgerConfig, RolloutState
from judger.runtime.sandbox import bwrap
from judger.scorers.code import same_stdout
from judger.testing.processes import sandbox_processes_after

pytestmark = pytest.mark.py310

C_100_50 = str(math.comb(100, 50))
LGAMMA_ESTIMATE = "import math\nprint(math.exp(math.lgamma(101) - 2 * math.lgamma(51)))"


def test_integer_answers_compare_exactly() -> None:
    assert not same_stdout("1e9", "1000000006")
    assert not same_stdout("1000000000.0", "1000000006")
    assert not same_stdout(repr(math.exp(math.lgamma(101) - 2 * math.lgamma(51))), C_100_50)
    assert not same_stdout("3.0000001", "3")
    assert (
        not same_stdout("7", "007")
        and not same_stdout("7.0e", "7")
        and not same_stdout("1e99999999999999999999", "7")
    )
    # the same value written otherwise is still the answer
    assert same_stdout(C_100_50, C_100_50) and same_stdout("7.0", "7") and same_stdout("1e9", "1000000000")
    assert same_stdout("-0.0", "0") and same_stdout("4 7.00\n", "4\n7")


def test_decimal_answers_keep_their_tolerance() -> None:
    assert same_stdout("0.5000000", "0.5") and same_stdout("0.3333333", "0.333333333")
    assert same_stdout("1000000006", "1e9")  # a decimal expected answer: within 1e-6 relative
    assert same_stdout("1000000000", "1e9") and same_stdout("1.0000001e9", "1e9")
    assert not same_stdout("0.51", "0.5")


@pytest.fixture
def no_process_left_behind() -> Iterator[None]:
    yield
    assert sandbox_processes_after(5.0) == []


@pytest.mark.skipif(bool(bwrap.probe()), reason=f"bubblewrap unavailable: {bwrap.probe()}")
@pytest.mark.usefixtures("no_process_left_behind")
async def test_estimates_of_exact_answers_score_zero_through_the_judger() -> None:
    judger = CodeJudgerConfig(wall_s=5, cpu_s=5).build()
    big = {"inputs": [""], "outputs": ["1000000006"]}
    binomial = {"inputs": [""], "outputs": [C_100_50]}
    half = {"inputs": [""], "outputs": ["0.5"]}
    cases = [
        ("print(1e9)", big),
        ("print(f'{1e9:g}')", big),
        (LGAMMA_ESTIMATE, binomial),
        # honest controls, one printing its integer as a float
        ("print(10**9 + 6)", big),
        ("import math\nprint(math.comb(100, 50))", binomial),
        ("print(float(10**9 + 6))", big),
        ("print(1 / 2 + 1e-9)", half),
    ]
    states = [
        RolloutState(response=f"```python\n{code}\n```", reward_model={"ground_truth": t})
        for code, t in cases
    ]
    out = await judger.batch_judge(states)
    assert [s.reward["score"] if s.reward else None for s in out] == [0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0]
