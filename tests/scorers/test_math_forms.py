"""The default MATH grading, category by category, in both directions (equal accepted, unequal rejected).

Policies (also in docs/concepts/grading.md): order counts in a tuple, ordered pair or bracket
list and not in a bare comma list or a set; a unit on one side only is dropped, units of two
dimensions reject, units of one dimension are converted; a decimal label is paid for an irrational
answer that rounds (or truncates) to it, a decimal answer for an exact label only where the prompt
asks for a decimal; power towers and huge powers are compared by value within the deadline. The
adversary that tries to farm each of these is tests/scorers/test_adversary.py.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest

from judger.scorers.math import reward as math_reward
from judger.scorers.math.reward import grade_answer

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

_spec = importlib.util.spec_from_file_location(
    "grading_categories", Path(__file__).parents[2] / "bench" / "grading" / "categories.py"
)
assert _spec is not None and _spec.loader is not None
categories = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(categories)

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
    ("12 \\text{ inches}", "1 \\text{ foot}", True),  # converted: the same length
    ("12 \\text{ inches}", "12 \\text{ feet}", False),  # another unit, not converted
    ("7 \\text{ km/h}", "7 \\text{ m/s}", False),
    ("25.2 \\text{ km/h}", "7 \\text{ m/s}", True),
    ("5 \\text{ m/s}", "5 \\text{ m/s}^2", False),  # another dimension
    ("9.8 m/s", "9.8 m/s^2", False),
    ("9.8\\ \\mathrm{m/s^2}", "9.8 \\text{ m/s}^2", True),
    ("7\\ \\mathrm{m\\,s^{-1}}", "7 \\text{ m/s}", True),
    ("5 \\text{ cm}", "5 \\text{ cm}^2", False),
    ("500 \\text{ cm}", "5 \\text{ m}", True),
    ("5 \\text{ apples}", "5 \\text{ pears}", False),
    ("90^\\circ", "90", True),
    ("90", "\\frac{\\pi}{2}", False),
    # decimals: without a prompt asking for one, a decimal is paid only its exact value
    ("2.828", "2\\sqrt{2}", False),
    ("2.83", "2\\sqrt{2}", False),
    ("0.7854", "\\frac{\\pi}{4}", False),
    ("1.41, 1.73", "\\sqrt{2}, \\sqrt{3}", False),
    ("3.3 \\times 10^{-2}", "\\frac{1}{30}", False),
    ("33.3", "\\frac{100}{3}", False),
    ("0.33", "\\frac{1}{3}", False),
    ("3.14", "\\pi", False),
    ("3", "\\pi", False),
    ("0.375", "\\frac38", True),  # exactly equal
    ("0.5", "\\frac12", True),
    # a decimal label: an irrational answer that rounds or truncates to it is paid
    ("2\\sqrt{2}", "2.83", True),
    ("2\\sqrt{2}", "2.82", True),  # the label truncated 2.828...
    ("2\\sqrt{2}", "2.84", False),
    ("40\\pi", "125.663", True),
    ("40\\pi", "125.67", False),
    ("\\frac{377}{3}", "125.667", False),  # a fraction near a decimal label is an estimate
    ("125.6637", "125.664", False),  # so is a more precise decimal
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
        ("\\boxed{1} and \\boxed{4}", "4", False),  # two different answers: no single one is paid
        ("\\boxed{4} and \\boxed{4}", "4", True),
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
    assert grade_answer("0.33", "\\frac{1}{3}") is False  # an estimate, where no decimal was asked for
    assert grade_answer("0.33", "\\frac{1}{3}", rounding="decimal") is True


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
        ("Final Answer: The final answer is $7$.", "7", True),  # no box: the stated answer (unboxed)
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


# (places the prompt asks for, answer, label, equal?)
ROUNDING_CASES: list[tuple[int | str, str, str, bool]] = [
    (2, "2.83", "2\\sqrt{2}", True),
    (2, "2.828", "2\\sqrt{2}", True),  # more places than asked, and right
    (2, "2.8", "2\\sqrt{2}", False),  # fewer places than asked
    (2, "2.82", "2\\sqrt{2}", False),  # truncated where a rounding was asked
    (1, "1.41, 1.73", "\\sqrt{2}, \\sqrt{3}", True),
    (1, "1.41, 1.8", "\\sqrt{2}, \\sqrt{3}", False),
    ("decimal", "0.33", "\\frac13", True),
    ("decimal", "0.3", "\\frac13", False),  # one significant digit says too little
    ("decimal", "0.34", "\\frac13", False),
    ("decimal", "3.3 \\times 10^{-2}", "\\frac{1}{30}", True),
    ("decimal", "0.7854", "\\frac{\\pi}{4}", True),
    ("decimal", "0.7853", "\\frac{\\pi}{4}", False),
    (3, "125.6637", "125.664", True),  # a more precise decimal of a rounded label
    (3, "\\frac{377}{3}", "125.667", True),
    (3, "125.6", "125.664", False),
]


@pytest.mark.parametrize(("rounding", "answer", "gold", "equal"), ROUNDING_CASES)
def test_a_decimal_is_paid_for_an_exact_value_where_the_prompt_asks_for_one(
    rounding: int | str, answer: str, gold: str, equal: bool
) -> None:
    assert grade_answer(answer, gold, rounding=rounding) is equal  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("prompt", "rounding"),
    [
        ("Express your answer as a decimal to the nearest hundredth.", 2),
        ("Round your answer to the nearest tenth.", 1),
        ("Give the answer to 3 decimal places.", 3),
        ("to two decimal places", 2),
        ("What is $\\pi$ to the nearest whole number?", 0),
        ("How much, to the nearest cent?", 2),
        ("Express your answer as a decimal.", "decimal"),
        ("Give your answer to three significant figures.", "decimal"),
        ("Express your answer as a common fraction.", None),
        ("Find the area of the circle.", None),
    ],
)
def test_the_rounding_a_prompt_asks_for(prompt: str, rounding: int | str | None) -> None:
    from judger.scorers.math.rounding import requested_rounding

    assert requested_rounding([{"role": "user", "content": prompt}]) == rounding


@pytest.mark.parametrize(
    ("prompt", "response", "gold", "equal"),
    [
        (
            "What is $\\sqrt{8}$? Express your answer as a decimal to the nearest hundredth.",
            "\\boxed{2.83}",
            "2\\sqrt{2}",
            True,
        ),
        ("What is $\\sqrt{8}$?", "\\boxed{2.83}", "2\\sqrt{2}", False),
        ("Find the ordered pair, in order.", "\\boxed{50625}", "50,\\!625", True),  # the label's separator
        ("Find them in order.", "\\boxed{50, 625}", "50,\\!625", False),
        ("Find them in order.", "\\boxed{50625}", "50{,}625", True),
        (
            "Simplify $\\frac{8}{22}$.",
            "\\boxed{\\frac{8}{22}}",
            "\\frac{4}{11}",
            False,
        ),  # the question restated
        ("Simplify $\\frac{8}{22}$.", "\\boxed{\\frac{4}{11}}", "\\frac{4}{11}", True),
        ("Compute $\\dbinom{8}{4}$.", "\\boxed{\\binom{8}{4}}", "70", False),
        ("Which is larger, $2^{10}$ or $10^3$?", "\\boxed{2^{10}}", "2^{10}", True),  # the label's own text
        ("What is $12+3$?", "\\boxed{2+13}", "15", True),  # not a restatement: 2+13 is not in 12+3
        ("q", "<think>so \\boxed{5}</think> I am not sure.", "5", False),  # reasoning is no answer
        ("q", "<think>maybe \\boxed{5}</think> so \\boxed{6}", "5", False),
        ("q", "<think>maybe \\boxed{6}</think> so \\boxed{5}", "5", True),
        ("q", "<think>long reasoning \\boxed{5}", "5", False),  # never closed: nothing committed
        ("q", "the template opened it</think> \\boxed{5}", "5", True),
        ("q", "\\boxed{72} or \\boxed{73}", "72", False),  # two guesses
        ("q", "\\boxed{73} or \\boxed{72}", "72", False),
        ("q", "\\boxed{72 \\text{ or } 73}", "72", False),
        ("q", "\\boxed{72, 73}", "72", False),
    ],
)
async def test_what_the_judger_reads_from_the_prompt_and_the_response(
    prompt: str, response: str, gold: str, equal: bool
) -> None:
    from judger import MathJudgerConfig, RolloutState

    state = RolloutState(
        message=[{"role": "user", "content": prompt}], response=response, reward_model={"ground_truth": gold}
    )
    out = await MathJudgerConfig().build().judge(state)
    assert out.reward["acc"] is equal, out.reward
    # the scorer on its own (verl's per-sample route, no prompt) never pays more than the judger
    if not equal:
        assert (
            math_reward.compute_score(response, gold)["acc"] is False
            or "Simplify" in prompt
            or "Compute" in prompt
        )


@pytest.mark.parametrize(
    ("response", "gold", "equal"),
    [
        ("The answer is $\\frac{1}{2}$.", "\\frac12", True),
        ("Final answer: 7/5", "\\frac75", True),
        ("We count the pairs:\n$\\binom{5}{2} = 10$", "10", True),
        ("**Final Answer:** 42", "42", True),
        ("The answer is 72 or 73.", "72", False),  # a stated hedge is a list
        ("The answer is $5$. Or maybe $6$.", "5", False),  # the statement was not the last word
        ("I computed $2+3=5$.\nThen I stopped to think about it.", "5", False),  # its last line has no math
        ("The answer is $\\frac{1}{2}$. \\boxed{3}", "\\frac12", False),  # a box always wins
        ("Final Answer: The largest $n$ is 34. I hope it is correct.<|im_end|>", "34", True),
        ("Final Answer: Jane started growing it 3 hours ago.", "3", True),  # its one number
        ("Thus the probability that Alice wins is 2/3.", "\\frac23", True),
        ("Thus $x <= 2$ is our answer.", "x \\leq 2", True),  # a relation kept whole
        ("Answer $ \n 9 \n $", "9", False),  # inline math never spans lines
        ("Answer $$ \n 9 \n $$", "9", True),  # display math may
        ("We get $72$ or $73$", "72", False),  # one value is read: the last
        ("Final answer: Jane says it could be 3 or 4 hours.", "3", False),  # two numbers: none
    ],
)
def test_an_answer_stated_without_a_box(response: str, gold: str, equal: bool) -> None:
    assert math_reward.compute_score(response, gold)["acc"] is equal
    assert math_reward.compute_score(response, gold, unboxed=False)["acc"] is False


def test_huge_powers_are_decided_by_value_within_the_deadline() -> None:
    started = time.monotonic()
    for answer, gold, equal in categories.HUGE_POWERS:
        assert grade_answer(answer, gold) is equal, (answer, gold)
    assert time.monotonic() - started < 30.0  # each is milliseconds; expanded, each one overran 10 s


def test_the_benchmark_category_cases_are_these_tables() -> None:
    # bench/grading/judger_categories.jsonl is written from them: rerun bench/grading/categories.py
    assert categories.OUT.read_text() == categories.text()
