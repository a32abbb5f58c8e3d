"""The default MATH grading, category by category, in both directions (equal accepted, unequal rejected).

Policies (also in the README's grading section): order counts in a tuple, ordered pair or bracket
list and not in a bare comma list or a set; a unit the label lacks is dropped, two different units
reject; a decimal equals an exact value when the value rounds to it at the decimal's last digit and
the decimal has two significant digits or more; power towers are compared by value at bounded
precision within the deadline.
"""

from __future__ import annotations

import time

import pytest

from judger.scorers.math import reward as math_reward
from judger.scorers.math.reward import grade_answer

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

# (answer, label, equal?)
CASES = [
    # order
    ("(3, -1, 2)", "(-1, 2, 3)", False),
    ("(-1, 2, 3)", "(-1, 2, 3)", True),
    ("(2,1)", "(1,2)", False),
    ("3, -1, 2", "-1, 2, 3", True),
    ("\\{3,-1,2\\}", "\\{-1,2,3\\}", True),
    ("[3,-1,2]", "[-1,2,3]", False),
    ("(1, 2)", "\\left(1,2\\right)", True),
    # units
    ("5 km", "5", True),
    ("5\\text{ km}", "5", True),
    ("7 hours", "7", True),
    ("3 m^2", "3", True),
    ("3\\text{ m}^2", "3", True),
    ("5\\text{ km}", "5\\text{ m}", False),
    ("5 \\text{ cm}", "5\\text{ m}", False),
    ("5\\text{ km}", "5\\text{ km}", True),
    ("6 \\text{ hours}", "7", False),
    ("12 \\text{ inches}", "1 \\text{ foot}", False),
    ("90^\\circ", "90", True),
    ("90", "\\frac{\\pi}{2}", False),
    # decimals
    ("2.828", "2\\sqrt{2}", True),
    ("2.83", "2\\sqrt{2}", True),
    ("2.8", "2\\sqrt{2}", True),
    ("2.82", "2\\sqrt{2}", False),
    ("2.9", "2\\sqrt{2}", False),
    ("0.7854", "\\frac{\\pi}{4}", True),
    ("0.785", "\\frac{\\pi}{4}", True),
    ("0.78", "\\frac{\\pi}{4}", False),
    ("0.7853", "\\frac{\\pi}{4}", False),
    ("1.41, 1.73", "\\sqrt{2}, \\sqrt{3}", True),
    ("1.41, 1.8", "\\sqrt{2}, \\sqrt{3}", False),
    ("3.3 \\times 10^{-2}", "\\frac{1}{30}", True),
    ("3.4 \\times 10^{-2}", "\\frac{1}{30}", False),
    ("33.3", "\\frac{100}{3}", True),
    ("33.4", "\\frac{100}{3}", False),
    ("0.333", "\\frac13", True),
    ("0.3", "\\frac13", False),
    ("0.33", "\\frac{1}{3}", True),
    ("0.34", "\\frac{1}{3}", False),
    ("3", "\\pi", False),
    ("3.14", "\\pi", True),
    ("3.1416", "\\pi", True),
    # forms
    ("2 3/4", "2.75", True),
    ("2\\frac{3}{4}", "\\frac{11}{4}", True),
    ("2\\frac{3}{4}", "\\frac{3}{2}", False),
    ("(1+i)^2", "2i", True),
    ("2e^{i\\pi/2}", "2i", True),
    ("1+i", "2i", False),
    ("-2i", "2i", False),
    ("\\cos(\\pi/2 - x)", "\\sin x", True),
    ("\\sin^2 x + \\cos^2 x", "1", True),
    ("\\cos x", "\\sin x", False),
    ("9:05", "9:05:00", True),
    ("21:05", "9:05 \\text{ p.m.}", True),
    ("9:05", "9:50", False),
    ("9:05 \\text{ a.m.}", "9:05 \\text{ p.m.}", False),
    ("g(t)=t^2", "y=t^2", True),
    ("f(x)=x^2+1", "x^2+1", True),
    ("y=t^3", "y=t^2", False),
    ("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", "\\begin{bmatrix}1&2\\\\3&4\\end{bmatrix}", True),
    ("\\begin{matrix}1&2\\\\3&4\\end{matrix}", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", True),
    ("[[1,2],[3,4]]", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", True),
    ("\\begin{pmatrix}1&2\\\\4&3\\end{pmatrix}", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", False),
    # noise
    ("12\\", "12", True),
    ("12;", "12", True),
    ("12!", "12", False),
    ("12,", "12", True),
    ("B", "B. 12", True),
    ("B. 12", "B", True),
    ("(B)", "B", True),
    ("\\text{(B)}", "B", True),
    ("C", "B. 12", False),
    ("C. 12", "B", False),
    ("12", "\\boxed{12} \\text{ or } \\boxed{-12}", False),
    ("12, -12", "\\boxed{12} \\text{ and } \\boxed{-12}", True),
    # towers
    ("2^{-2^{1000}}", "2^{-2^{1000}}", True),
    ("2^{-2^{1000}}", "2^{-2^{1001}}", False),
    ("(0, 2^{-2^{1000}})", "(0, 2^{-2^{1000}})", True),
    ("0", "2^{-2^{1000}}", False),
]


@pytest.mark.parametrize(("answer", "gold", "equal"), CASES)
def test_default_grading_by_category(answer: str, gold: str, equal: bool) -> None:
    assert grade_answer(answer, gold) is equal


def test_power_towers_are_decided_by_value_within_the_deadline() -> None:
    started = time.monotonic()
    assert grade_answer("2^{-2^{1000}}", "2^{-2^{1001}}") is False
    assert grade_answer("(0, 2^{-2^{1000}}]", "(0, 2^{-2^{1000}}]") is True
    assert grade_answer("(0, 2^{-2^{1000}}]", "(0, 2^{-2^{1000}})") is False
    assert time.monotonic() - started < 5.0


@pytest.mark.parametrize(
    ("label", "answer", "equal"),
    [
        ("\\boxed{1} papers and \\boxed{2} bins", "1, 2", True),
        ("\\(\\boxed{1}\\) and \\(\\boxed{-2}\\).", "-2, 1", True),
        ("\\boxed{1}\\boxed{2}", "1,2", True),
        ("\\boxed{1}\\boxed{2}", "2", False),
        ("\\boxed{1} no no no no no \\boxed{2}", "1, 2", False),  # too far apart: the last box is the label
    ],
)
def test_a_label_of_several_boxes(label: str, answer: str, equal: bool) -> None:
    assert grade_answer(answer, label) is equal


def test_several_boxed_answers_in_the_label_are_one_list() -> None:
    out = math_reward.compute_score("so \\boxed{-12, 12}", "\\boxed{12} \\text{ and } \\boxed{-12}")
    assert out["acc"] is True
    assert (
        math_reward.compute_score("so \\boxed{12}", "\\boxed{12} \\text{ and } \\boxed{-12}")["acc"] is False
    )


def test_verl_mode_is_untouched_by_the_default_forms() -> None:
    # verl compares normalised strings: none of the default mode's forms reach it
    assert math_reward.compute_score("\\boxed{2.828}", "2\\sqrt{2}", compat="verl")["acc"] is False
    assert math_reward.compute_score("\\boxed{5 km}", "5", compat="verl")["acc"] is False
    assert math_reward.compute_score("\\boxed{12\\}", "12", compat="verl")["acc"] is False


@pytest.mark.parametrize(
    ("response", "gold", "equal"),
    [
        ("\\boxed{1} and \\boxed{2} and \\boxed{3}", "\\{1,2,3\\}", True),
        ("so $\\boxed{(2, 2)} \\quad \\text{and} \\quad \\boxed{(6, 2)}$", "(2, 2), (6, 2)", True),
        ("\\boxed{1} and \\boxed{2}", "\\{1,2,3\\}", False),
        ("\\boxed{1} and \\boxed{4}", "4", True),  # the last box alone still counts, as before
        ("first \\boxed{3}; later we find that it is \\boxed{2}", "2, 3", False),  # not one run of boxes
    ],
)
def test_a_run_of_boxes_ending_the_response_is_one_answer(response: str, gold: str, equal: bool) -> None:
    assert math_reward.compute_score(response, gold)["acc"] is equal


async def test_the_judger_grades_a_run_of_boxes_once_per_distinct_run() -> None:
    from judger import MathJudgerConfig, RolloutState

    judge = MathJudgerConfig().build()
    states = [
        RolloutState(
            message=[{"role": "user", "content": "q"}], response=r, reward_model={"ground_truth": "1, 2"}
        )
        for r in ("\\boxed{1}, \\boxed{2}", "so \\boxed{2}", "\\boxed{2} and \\boxed{1}")
    ]
    out = await judge.batch_judge(states)
    assert [s.reward["acc"] for s in out] == [True, False, True]


@pytest.mark.parametrize(
    ("prompt", "response", "gold", "equal"),
    [
        ("Enter all the solutions, separated by commas.", "\\boxed{3, -1, 2}", "-1, 2, 3", True),
        ("List the roots in increasing order.", "\\boxed{3, -1, 2}", "-1, 2, 3", False),
        ("List the roots in increasing order.", "\\boxed{-1, 2, 3}", "-1, 2, 3", True),
        ("Order them from least to greatest.", "\\boxed{0.5, \\frac14}", "\\frac14, \\frac12", False),
        ("Order them from least to greatest.", "\\boxed{0.25, 0.5}", "\\frac14, \\frac12", True),
        ("Find the ordered triple.", "\\boxed{(3, -1, 2)}", "(-1, 2, 3)", False),
        ("Find the set of solutions.", "\\boxed{\\{3, -1, 2\\}}", "\\{-1, 2, 3\\}", True),
    ],
)
async def test_order_comes_from_the_label_form_and_the_prompt(
    prompt: str, response: str, gold: str, equal: bool
) -> None:
    from judger import MathJudgerConfig, RolloutState

    state = RolloutState(
        message=[{"role": "user", "content": prompt}], response=response, reward_model={"ground_truth": gold}
    )
    out = await MathJudgerConfig().build().judge(state)
    assert out.reward["acc"] is equal


def test_a_spaced_comma_list_is_not_a_grouped_number() -> None:
    assert grade_answer("32, 349", "32349") is False
    assert grade_answer("32,349", "32349") is True


@pytest.mark.parametrize(
    ("answer", "gold", "equal"),
    [
        ("1000,99", "1000.99", True),
        ("1.22", "1,22", True),
        ("1,23", "1.22", False),
        ("0,111", "0.111", True),
        ("1,225", "1.225", False),
    ],
)
def test_a_decimal_comma_against_a_decimal_point(answer: str, gold: str, equal: bool) -> None:
    assert grade_answer(answer, gold) is equal


def test_boxes_named_by_their_unknowns_are_one_answer() -> None:
    response = "\\( y_1 = \\boxed{-2(x - 1)^2 + 5} \\) and \\( y_2 = \\boxed{3(x + 2)^2 - 2} \\)"
    assert math_reward.compute_score(response, "y_{1}=-2 x^{2}+4 x+3, y_{2}=3 x^{2}+12 x+10")["acc"] is True
    assert math_reward.compute_score(response, "y_{1}=-2 x^{2}+4 x+3, y_{2}=3 x^{2}+12 x+11")["acc"] is False


def test_two_different_plain_numbers_are_decided_without_math_verify(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_parser(*args: object) -> bool:
        raise AssertionError("Math-Verify was called")

    monkeypatch.setattr(math_reward, "equivalent", no_parser)
    assert grade_answer("11", "4") is False
    assert grade_answer("\\frac{3}{16}", "\\frac{3}{8}") is False
    assert grade_answer("0.33", "\\frac{1}{3}") is True  # an approximation is still one


@pytest.mark.parametrize(
    ("response", "gold", "equal"),
    [
        (
            "so $= \\boxed{255}$ and in all $10,455. Final Answer: The final answer is $10,455$. I hope",
            "10455",
            True,
        ),
        (
            "so $= \\boxed{255}$ and in all $10,455. Final Answer: The final answer is $10,455$. I hope",
            "255",
            False,
        ),
        ("so \\boxed{7}. Final Answer: The final answer is $7$.", "7", True),
        ("Final Answer: The final answer is $7$.", "7", False),  # no box at all: the format requirement stays
    ],
)
def test_a_final_answer_stated_after_the_last_box_overrides_it(response: str, gold: str, equal: bool) -> None:
    assert math_reward.compute_score(response, gold)["acc"] is equal


def test_numbers_past_the_int_digit_limit_do_not_break_the_forms() -> None:
    # the forms added here convert no digit string past Python's limit (plain_number's own guard
    # is another change's)
    from judger.scorers.math.approx import stated_decimal, tower_value
    from judger.scorers.math.forms import mixed_number
    from judger.scorers.math.numeric import decimal_comma_equal

    big = "7" * 5000
    assert decimal_comma_equal(f"{big}.5", f"{big},5") is False
    assert mixed_number(f"1 2/{big}") is None
    assert stated_decimal(f"{big}.5") is None
    assert tower_value(f"2^{{{big}^{{2}}}}") is None


def test_a_tower_too_large_to_evaluate_is_left_to_the_deadline() -> None:
    from judger.scorers.math.approx import tower_value

    started = time.monotonic()
    assert tower_value("9^{9^{9^9}}") is None
    assert tower_value("2^{-2^{1000}}") is not None
    assert time.monotonic() - started < 2.0


@pytest.mark.parametrize(
    ("answer", "gold", "equal"),
    [
        ("10 in", "10\\text{ inches}", True),
        ("36 \\text{ square centimeters}", "36\\text{ cm}^2", True),
        ("2 hrs", "2 \\text{ hours}", True),
        ("36 \\text{ square centimeters}", "36\\text{ cm}", False),
        ("(A) or (B)", "A", False),  # a hedge between options is not the letter
        ("A or B", "A", False),
        ("A. 12", "A", True),
    ],
)
def test_unit_spellings_and_option_hedges(answer: str, gold: str, equal: bool) -> None:
    assert grade_answer(answer, gold) is equal
