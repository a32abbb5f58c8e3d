"""judger's MATH verdicts must not depend on which antlr4 runtime is installed.

verl brings hydra-core, which pins antlr4-python3-runtime 4.9.3; latex2sympy2_extended then fails
on every percent number and Math-Verify silently parses nothing. Here the parser is made to fail
the same way; the client tier (tests/clients) runs the same checks with the real 4.9.3 installed.
"""

from __future__ import annotations

import json
import warnings

import pytest

pytest.importorskip("math_verify")

import latex2sympy2_extended

from judger.scorers.math import grade
from judger.scorers.math.reward import compute_score
from judger.trainer.io import example_data

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]


def _broken(*args: object, **kwargs: object) -> object:
    raise AttributeError("'AtomContext' object has no attribute 'FUNC_GAMMA'")


@pytest.fixture
def broken_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    """latex2sympy as it behaves under antlr4 4.9.3 on the answers at stake: it raises."""
    monkeypatch.setattr(latex2sympy2_extended, "latex2sympy", _broken)
    monkeypatch.setattr("math_verify.parser.latex2sympy", _broken)
    caches = [grade._configs, *([grade.check_latex_parser] if hasattr(grade, "check_latex_parser") else [])]
    for cache in caches:
        cache.cache_clear()
    yield
    for cache in caches:
        cache.cache_clear()


@pytest.mark.parametrize(
    ("response", "label"),
    [
        ("\\boxed{50}", "50\\%"),
        ("\\boxed{50\\%}", "50"),
        ("\\boxed{0.5}", "50\\%"),
        ("\\boxed{10}", "10\\text{ cm}"),
        ("\\boxed{\\$5}", "5"),
        ("\\boxed{90^\\circ}", "90"),
        ("\\boxed{1,000}", "1000"),
        ("\\boxed{\\frac{3}{4}}", "75\\%"),
    ],
)
def test_percent_and_unit_answers_grade_without_the_parser(
    broken_parser: None, response: str, label: str
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert compute_score(response, label)["score"] == 1.0


def test_unequal_numbers_stay_wrong() -> None:
    from judger.scorers.math.numeric import numerically_equal, plain_number

    assert not numerically_equal("51", "50\\%")
    assert not numerically_equal("x", "5")
    assert plain_number("50\\%") == (50, True)
    assert plain_number("\\frac{1}{0}") is None


def test_bundled_math_responses_score_the_same_with_a_broken_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [json.loads(line) for line in example_data("math_rollouts_dev.jsonl").read_text().splitlines()]
    percent = [r for r in rows if "%" in str(r["reward_model"]["ground_truth"])]
    assert len(percent) >= 5
    expected = [compute_score(r["response"], r["reward_model"]["ground_truth"])["score"] for r in percent]
    monkeypatch.setattr("math_verify.parser.latex2sympy", _broken)
    import math_verify.parser

    math_verify.parser.parse_latex_cached.cache_clear()  # Math-Verify caches parses
    grade._configs.cache_clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = [compute_score(r["response"], r["reward_model"]["ground_truth"])["score"] for r in percent]
    grade._configs.cache_clear()
    assert got == expected and sum(expected) >= 5


def test_a_broken_parser_is_reported_once_with_the_fix(broken_parser: None) -> None:
    problem = grade.latex_parser_problem()
    assert problem is not None and "antlr4-python3-runtime==4.13.2" in problem and "FUNC_GAMMA" in problem
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        grade.parse_boxed("1")
        grade.parse_boxed("2")
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1 and "latex2sympy cannot parse" in messages[0]


def test_the_installed_parser_is_judged_right() -> None:
    """antlr4 4.13 works; 4.9.3 (verl's environment, the client tier) is reported."""
    from importlib.metadata import version

    works = version("antlr4-python3-runtime").startswith("4.13")
    assert (grade.latex_parser_problem() is None) is works
