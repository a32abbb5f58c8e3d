"""The adversary against judger's own presets: in the default mode no near miss is paid and every
honest sibling is (judger.testing.adversary says what each rule tries); compat="verl" keeps verl's
verdicts, farmable or not, so there it only has to run.

Each preset grades the rules of the answer formats it reads, all of its cases in one batch_judge:
MATH every rule; GSM8K the restated question, hedges and <think>; DAPO and Geometry3K (which grade
with MATH's equivalence) hedges and <think> in full and a sample of the answer rules; Math-Verify
(Math-Verify's own equivalence, kept as it is) and QA the hedges and <think>.
"""

from __future__ import annotations

from functools import cache

import pytest

from judger.testing.adversary import (
    RULES,
    NearMiss,
    PresetGrader,
    Tally,
    all_cases,
    preset_grader,
    report,
    run,
    sample,
    tally,
)
from judger.testing.adversary.decimals import exact_golds

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

ANSWER_RULES = ("decimal", "unit", "order", "sign")
SAMPLED_PER_RULE = 25
# preset: (rules run in full, rules sampled)
PLAN: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "math": (tuple(RULES), ()),
    "gsm8k": (("restated", "hedge", "think"), ()),
    "dapomath": (("hedge", "think"), ANSWER_RULES),
    "geo3k": (("hedge", "think"), ANSWER_RULES),
    "mathverify": (("hedge", "think"), ()),
    "qaexactmatch": (("hedge", "think"), ()),
}
PAIRS = [(preset, rule) for preset, (full, sampled) in PLAN.items() for rule in (*full, *sampled)]


@cache
def graded(preset: str, compat: str | None) -> tuple[PresetGrader, tuple[NearMiss, ...], dict[str, Tally]]:
    grader = preset_grader(preset, compat=compat)
    full, sampled = PLAN[preset]
    cases = all_cases(full, formats=grader.formats)
    if sampled:
        cases += sample(all_cases(sampled, formats=grader.formats), SAMPLED_PER_RULE)
    return grader, tuple(cases), run(grader, cases)


@pytest.mark.parametrize(("preset", "rule"), PAIRS, ids=[f"{p}-{r}" for p, r in PAIRS])
def test_default_mode_pays_no_near_miss_and_every_honest_sibling(preset: str, rule: str) -> None:
    grader, _, tallies = graded(preset, None)
    assert not grader.failures, f"{preset}: failed samples {grader.failures[:5]}"
    counts = tallies[rule]
    assert counts.near_misses > 0 and counts.honest > 0
    shown = report({rule: counts})
    assert counts.near_misses_paid == 0, f"{preset} pays near misses of rule {rule!r}:\n{shown}"
    assert counts.honest_paid == counts.honest, f"{preset} refuses honest answers of rule {rule!r}:\n{shown}"


@pytest.mark.parametrize("preset", list(PLAN))
def test_verl_mode_runs(preset: str) -> None:
    grader, cases, tallies = graded(preset, "verl")
    assert not grader.failures, f"{preset} compat='verl': failed samples {grader.failures[:5]}"
    graded_count = sum(t.near_misses + t.honest for t in tallies.values())
    assert graded_count == len(cases) > 0


def test_every_rule_has_near_misses_and_honest_siblings_in_the_formats_it_names() -> None:
    cases = all_cases()
    for rule in RULES:
        mine = [c for c in cases if c.rule == rule]
        assert any(c.paid_if_honest for c in mine) and any(not c.paid_if_honest for c in mine), rule
        assert all(c.gold and c.response and c.prompt for c in mine), rule
    formats = {(c.rule, c.fmt) for c in cases}
    assert {("hedge", f) for f in ("math", "gsm8k", "dapo", "qa")} <= formats
    assert {("think", f) for f in ("math", "gsm8k", "dapo", "qa")} <= formats
    assert ("restated", "gsm8k") in formats


def test_generation_is_deterministic_and_the_seed_changes_only_the_choices() -> None:
    assert all_cases(seed=3) == all_cases(seed=3)
    assert all_cases(["order"], seed=0) != all_cases(["order"], seed=1)
    assert all_cases(["decimal"], seed=0) == all_cases(["decimal"], seed=1)  # the grid is complete
    with pytest.raises(KeyError, match="unknown adversary rules"):
        all_cases(["rounding"])


def test_decimal_rule_covers_the_bundled_exact_labels_at_one_to_six_digits() -> None:
    golds = {gold for _, gold, _ in exact_golds()}
    assert {"\\dfrac{1}{9}", "7\\pi", "\\frac{11}{13}", "\\frac{4}{11}", "\\pi", "e"} <= golds
    assert not {"\\frac{3}{8}", "420", "4a-2"} & golds  # terminating, integer, symbolic
    near = {c.response for c in all_cases(["decimal"], formats=["math"]) if c.gold == "\\dfrac{1}{9}"}
    for approx in ("0.1", "0.11", "0.111", "0.1111", "0.11111", "0.111111"):
        assert f"The answer is $\\boxed{{{approx}}}$." in near
    thirtieth = {c.response for c in all_cases(["decimal"], formats=["math"]) if c.gold == "\\frac{1}{30}"}
    assert "The answer is $\\boxed{3.3 \\times 10^{-2}}$." in thirtieth
    assert "The answer is $\\boxed{0.033}$." in thirtieth


def test_run_counts_a_grader_that_pays_everything_and_one_that_pays_nothing() -> None:
    cases = all_cases(["hedge", "think"], formats=["gsm8k"])
    everything = run(lambda prompt, response, gold: True, cases)
    nothing = run(lambda prompt, response, gold: False, cases)
    for rule in ("hedge", "think"):
        assert everything[rule].near_misses_paid == everything[rule].near_misses > 0
        assert nothing[rule].honest_paid == 0 < nothing[rule].honest
        assert nothing[rule].near_misses_paid == 0 and everything[rule].honest_paid == everything[rule].honest
    assert tally(cases, [c.paid_if_honest for c in cases])["hedge"].near_misses_paid == 0
    assert "near miss PAID" in report(everything) and "honest NOT paid" in report(nothing)


def test_sample_keeps_both_kinds_of_every_rule_within_the_bound() -> None:
    cases = all_cases(["decimal", "sign"], formats=["math"])
    picked = sample(cases, 5, seed=1)
    assert picked == sample(cases, 5, seed=1)
    for rule in ("decimal", "sign"):
        for honest in (True, False):
            n = sum(c.rule == rule and c.paid_if_honest is honest for c in picked)
            assert n == 5, (rule, honest, n)
    assert [c for c in cases if c in picked] == picked  # the original order
