"""MATH (``\\boxed{}``) and Math-Verify scorers: golden cases in both modes.

The ``compat="verl"`` expectations were cross-checked against verl 0.9.1's own modules loaded by
file path (``python bench/bench_math.py --check-verl``: 0 differences over 20,392 cases).
"""

from __future__ import annotations

import pytest

from judger.scorers.math import reward as math_reward
from judger.scorers.math import verify as math_verify_reward
from judger.scorers.math.boxed import last_boxed, last_boxed_only_string_verl
from judger.scorers.math.strip import is_equiv_verl, strip_string

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]


def boxed(answer: str) -> str:
    return f"Some reasoning. The final answer is $\\boxed{{{answer}}}$."


# --- extraction --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a \\boxed{1} b \\boxed{\\frac{1}{2}} c", "\\frac{1}{2}"),
        ("\\boxed{\\left(1, \\{2\\}\\right)}", "\\left(1, \\{2\\}\\right)"),
        ("so \\fbox{7} end", "7"),
        ("\\boxed 5$ and more", "5"),
        ("\\boxed {5}", "5"),
        ("\\boxed{72.}", "72"),
        ("\\boxed{$5$}", "5"),
        ("\\boxed{1, 2, \\ldots}", "1, 2, \\ldots"),
        ("\\boxed{unclosed", None),
        ("no box here", None),
    ],
)
def test_last_boxed(text: str, expected: str | None) -> None:
    assert last_boxed(text) == expected


def test_last_boxed_is_linear_on_huge_text() -> None:
    text = "x{" * 2_000_000 + "\\boxed{42}" + " filler" * 1_000_000
    assert last_boxed(text) == "42"


def test_verl_extraction_quirks() -> None:
    # "\boxed " anywhere wins over a later "\boxed{...}"
    assert last_boxed_only_string_verl("\\boxed 3$ then \\boxed{4}") == "\\boxed 3"
    assert last_boxed_only_string_verl("\\fbox{7}") == "\\fbox{7}"
    assert last_boxed_only_string_verl("\\boxed}{5}") is None


# --- verl's strip_string ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "normalised"),
    [
        ("\\dfrac{1}{2}", "\\frac{1}{2}"),
        ("\\frac12", "\\frac{1}{2}"),
        ("\\frac1{72}", "\\frac{1}{72}"),
        ("0.5", "\\frac{1}{2}"),
        ("3/4", "\\frac{3}{4}"),
        ("x = 5", "5"),
        ("\\sqrt3", "\\sqrt{3}"),
        ("90^\\circ", "90"),
        ("5\\text{ cm}", "5"),
        ("10\\%", "10"),
        (".25", "0.25"),
        ("\\left( 1, 2 \\right)", "(1,2)"),
        ("\\$5", "5"),
    ],
)
def test_strip_string(raw: str, normalised: str) -> None:
    assert strip_string(raw) == normalised


def test_verl_falls_back_to_raw_comparison_when_normalising_raises() -> None:
    # "\sqrt" with nothing after it makes verl's normaliser raise: raw strings are compared
    assert is_equiv_verl("\\sqrt", "\\sqrt") is True
    assert is_equiv_verl("2\\sqrt", " 2\\sqrt") is False
    assert is_equiv_verl("5", 5) is False  # an int label cannot be normalised


# --- math_reward, both modes -----------------------------------------------------------------------

# (response, ground truth, verl score, our score)
GOLDEN = [
    (boxed("420"), "420", 1.0, 1.0),
    (boxed("\\dfrac{1}{2}"), "\\frac12", 1.0, 1.0),
    (boxed("0.5"), "\\frac{1}{2}", 1.0, 1.0),
    (boxed("x = 5"), "5", 1.0, 1.0),
    (boxed("41"), "42", 0.0, 0.0),
    # verl's known false negative (reference): 5.0 vs 5
    (boxed("5.0"), "5", 0.0, 1.0),
    # more string-equality false negatives that equivalence fixes
    (boxed("0.75"), "\\frac{3}{4}", 0.0, 1.0),
    (boxed("\\pi/2"), "\\frac{\\pi}{2}", 0.0, 1.0),
    (boxed("2\\sqrt{2}"), "\\sqrt{8}", 0.0, 1.0),
    (boxed("1+x^2"), "x^2+1", 0.0, 1.0),
    (boxed("72."), "72", 0.0, 1.0),
    (boxed("4:30 \\text{ p.m.}"), "\\text{4:30 p.m.}", 0.0, 1.0),
    ("The answer is \\fbox{7}.", "7", 0.0, 1.0),
    (boxed("1,000"), "1000", 0.0, 1.0),
    # Math-Verify's tiny-number false positives stay wrong
    (boxed("\\frac{1}{2006!}"), "\\frac{1}{2004!}", 0.0, 0.0),
    (boxed("\\frac{1}{2^{98}}"), "\\frac{1}{2^{99}}", 0.0, 0.0),
    (boxed("\\frac{1}{2^{99}}"), "\\frac{1}{2^{99}}", 1.0, 1.0),
    # no box: verl needs one; the default mode reads a stated final answer (unboxed=True)
    ("The answer is 5.", "5", 0.0, 1.0),
    ("I think so, but I cannot tell.", "5", 0.0, 0.0),
    (boxed("3, 5"), "3", 0.0, 0.0),
]


@pytest.mark.parametrize(("response", "gt", "verl", "ours"), GOLDEN)
def test_math_golden_both_modes(response: str, gt: str, verl: float, ours: float) -> None:
    v = math_reward.compute_score(response, gt, compat="verl")
    o = math_reward.compute_score(response, gt)
    assert (v["score"], o["score"]) == (verl, ours)
    assert v["acc"] is (verl == 1.0) and o["acc"] is (ours == 1.0)


def test_math_outputs_pred_for_majority_voting() -> None:
    out = math_reward.compute_score(boxed("\\frac{1}{2}"), "0.5")
    assert out == {"score": 1.0, "acc": True, "pred": "\\frac{1}{2}"}
    assert math_reward.compute_score("no box", "1")["pred"] is None
    assert math_reward.compute_score("42", "42", extracted=True)["acc"] is True
    assert math_reward.compute_score(None, "42", extracted=True)["score"] == 0.0
    assert math_reward.compute_score(boxed("6"), 6)["acc"] is True  # an int label works here
    with pytest.raises(ValueError, match="compat"):
        math_reward.compute_score("x", "1", compat="xtuner")  # type: ignore[arg-type]


# --- Math-Verify scorer ------------------------------------------------------------------------------

MV_GOLDEN = [
    ("So the answer is $\\frac{1}{2}$.", "0.5", 1.0, 1.0),
    (boxed("5.0"), "5", 1.0, 1.0),
    ("The result: $x = 3$", "3", 1.0, 1.0),
    (boxed("41"), "42", 0.0, 0.0),
    # Math-Verify's known false positive: only the default mode rejects it
    (boxed("\\frac{1}{2006!}"), "\\frac{1}{2004!}", 1.0, 0.0),
    ("no math at all", "7", 0.0, 0.0),
]


@pytest.mark.parametrize(("response", "gt", "verl", "ours"), MV_GOLDEN)
def test_math_verify_golden_both_modes(response: str, gt: str, verl: float, ours: float) -> None:
    assert math_verify_reward.compute_score(response, gt, compat="verl")["score"] == verl
    out = math_verify_reward.compute_score(response, gt)
    assert out["score"] == ours and out["acc"] is (ours == 1.0)


def test_math_verify_default_fails_on_unparseable_label_instead_of_scoring_zero() -> None:
    with pytest.raises(ValueError, match="cannot parse the label"):
        math_verify_reward.compute_score(boxed("1"), "")
    assert math_verify_reward.compute_score(boxed("1"), "", compat="verl")["score"] == 0.0


def test_math_verify_verl_mode_needs_the_main_thread_like_verl() -> None:
    import threading

    out: list[dict[str, object]] = []
    t = threading.Thread(
        target=lambda: out.append(math_verify_reward.compute_score(boxed("5"), "5", compat="verl"))
    )
    t.start()
    t.join()
    # verl's silent zero: Math-Verify's signal.alarm refuses to run in a thread (why we use processes)
    assert out[0]["score"] == 0.0
    assert math_verify_reward.compute_score(boxed("5"), "5", compat="verl")["score"] == 1.0
