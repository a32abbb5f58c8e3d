"""The summary table and examples of `judger score`."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import pytest
from rich.console import Console

from judger import RolloutState, Status
from judger.cli.report import examples, render_examples, render_summary, shorten
from judger.cli.tally import summarize

pytestmark = pytest.mark.py310


def _state(source: str, group: str, acc: bool | None, response: str = "r") -> RolloutState:
    s = RolloutState(
        message=[{"role": "system", "content": "sys"}, {"role": "user", "content": "question?"}],
        data_source=source,
        group_id=group,
        response=response,
        reward_model={"ground_truth": "g"},
        status=Status.COMPLETED,
    )
    if acc is None:
        s.status = Status.FAILED
        s.extra_fields["judge_failure"] = {"judger": "j", "kind": "timeout"}
        s.error_msg = "JudgeTimeoutError: too slow"
    else:
        s.reward = {"score": float(acc), "acc": acc, "pred": "p" if acc else "q"}
    return s


def test_sources_with_different_group_sizes_get_an_n_column() -> None:
    states = [_state("a", "a0", i == 0) for i in range(4)] + [
        _state("b", "b0", True),
        _state("b", "b0", None),
    ]
    states += [_state("b", "b0", False)]
    summary = summarize(states, elapsed_s=2.0)
    assert summary["data_sources"]["a"]["at_n"]["n"] == 4
    assert summary["data_sources"]["b"]["at_n"]["n"] == 2  # the timed-out sample is left out
    assert summary["timed_out"] == 1 and summary["samples_per_s"] == 3.5
    console = Console(record=True, width=200)
    render_summary(summary, console)
    text = console.export_text()
    assert "mean@N" in text and "pass@N" in text and "all" in text
    assert "7 samples in 2.0 s (3.5 samples/s)" in text


def test_examples_pick_k_per_source_and_shorten() -> None:
    long = "x" * 1000 + " the answer is 7"
    states = [_state("a", "a0", True, long), _state("a", "a1", False), _state("b", "b0", None)]
    rows = examples(states, 1)
    assert [r["data_source"] for r in rows] == ["a", "b"]
    assert rows[0]["prompt"] == "question?"  # the last user message
    assert rows[0]["response"].endswith("the answer is 7") and len(rows[0]["response"]) == 301
    assert rows[1]["error"] == "JudgeTimeoutError: too slow" and rows[1]["score"] is None
    console = Console(record=True, width=120)
    render_examples(rows, console)
    text = console.export_text()
    assert "a [completed]" in text and "b [failed]" in text and "error: JudgeTimeoutError" in text
    assert shorten("a\n\n b", 10) == "a b"


def _tallied(states: list[RolloutState], chunk: int, elapsed_s: float) -> tuple[dict, dict]:
    """The summary of a :class:`~judger.cli.tally.Tally` fed ``states`` ``chunk`` at a time, and
    :func:`summarize`'s of the same states."""
    from judger.cli.tally import Tally

    tally = Tally()
    for lo in range(0, len(states), chunk):
        tally.add(states[lo : lo + chunk])
    return tally.summary(elapsed_s), summarize(states, elapsed_s=elapsed_s)


def test_the_streamed_tally_summarises_exactly_as_summarize_does() -> None:
    """judger score keeps columns of numbers, not the states: its summary must be the same dict."""
    states = []
    for i in range(60):
        group = None if i % 10 == 9 else f"g{i // 4}"
        s = _state(
            "a" if i % 3 else "b", group or "x", acc=None if i % 17 == 5 else bool(i % 2), response=str(i)
        )
        if group is None:
            s.group_id = None
            s.message = [{"role": "user", "content": f"prompt {i // 20}"}]
        if s.reward is not None:
            s.reward["tokens"] = i  # another numeric variable
            if i % 7 == 0:
                s.reward["note"] = "short" if i % 2 else 3  # a variable that is not numeric
        if i % 13 == 0:
            s.status, s.reward = Status.ABORTED, None  # not judged, not failed: skipped
        states.append(s)
    got, expected = _tallied(states, 16, 1.5)
    assert got == expected
    assert (
        expected["data_sources"]["a"]["at_n"] is not None
        and expected["skipped"] > 0
        and expected["timed_out"] > 0
    )


@pytest.mark.parametrize("huge", [10**400, Fraction(10**400, 3)])
def test_a_number_past_floats_range_in_a_reward_is_summarised_not_raised(huge: Any) -> None:
    """One sample's reward variable holding a number no float holds (an int, a Fraction) must not stop
    the report (it was an OverflowError out of the tally, the summary and the metrics); it counts as
    missing, as NaN does, in the tally as in :func:`summarize`, whether groups hold one sample or
    several."""
    for group_of in (lambda i: f"g{i}", lambda i: f"g{i // 3}"):
        states = []
        for i in range(12):
            s = _state("a", group_of(i), acc=bool(i % 2))
            assert s.reward is not None
            s.reward["digits"] = huge if i == 4 else i
            if i == 7:
                s.reward["acc"] = huge
            states.append(s)
        got, expected = _tallied(states, 5, 1.0)
        assert got == expected
        source = expected["data_sources"]["a"]
        assert source["judged"] == 12 and source["metrics"]["digits"]  # the others' values count
        assert source["accuracy"] == 5 / 11  # the acc no float holds is no accuracy
        states[4].reward["digits"] = None  # type: ignore[index]
        assert summarize(states, elapsed_s=1.0)["data_sources"]["a"]["metrics"] == source["metrics"]


def test_numpy_scalars_count_as_the_numbers_they_hold_and_nan_beside_none_is_missing() -> None:
    """A handler's ``acc`` as NumPy computes it (``np.bool_``, ``np.float32``) is an accuracy: it
    was no number to the report (accuracy None beside metrics that had it). A NaN in a variable that
    also has None counts as missing, as it does where the variable has no None: the summary showed
    ``mean@1: nan`` and differed from the streamed tally's."""
    np = pytest.importorskip("numpy")
    for values in ([np.bool_(True), np.bool_(False)], [np.float32(1.0), np.float32(0.0)]):
        states = []
        for i in range(8):
            s = _state("a", f"g{i // 2}", acc=True)
            assert s.reward is not None
            s.reward["acc"] = values[i % 2]
            states.append(s)
        got, expected = _tallied(states, 3, 1.0)
        assert got == expected and expected["data_sources"]["a"]["accuracy"] == 0.5
    states = []
    for i in range(8):
        s = _state("a", f"g{i // 2}", acc=bool(i % 2))
        assert s.reward is not None
        s.reward["ratio"] = {0: None, 1: math.nan}.get(i, i / 8)
        states.append(s)
    got, expected = _tallied(states, 3, 1.0)
    assert got == expected
    ratio = expected["data_sources"]["a"]["metrics"]["ratio"]
    assert all(math.isfinite(v) for v in ratio.values()), ratio
    states[1].reward["ratio"] = None  # type: ignore[index]
    assert summarize(states, elapsed_s=1.0)["data_sources"]["a"]["metrics"]["ratio"] == ratio


def test_the_tally_of_one_sample_per_prompt_summarises_as_summarize_does() -> None:
    """The NumPy-free mean@1 (whole numbers) and the full metrics (fractions) give the same summary."""
    for fractional in (False, True):
        states = []
        for i in range(50):
            s = _state("a" if i % 3 else "b", f"g{i}", acc=None if i % 11 == 4 else bool(i % 4))
            if s.reward is not None:
                s.reward["tokens"] = i * 1.25 if fractional else i
                if i % 5 == 0:
                    del s.reward["acc"]  # a variable some samples lack
            states.append(s)
        got, expected = _tallied(states, len(states), 1.0)
        assert got == expected
        assert expected["data_sources"]["a"]["metrics"]["tokens"]["mean@1"] > 0
