"""The one batch driver: ``Judger.batch_judge`` takes a shortcut only where the judger declares the
capability for it, and overriding a hook -- in a subclass or on one instance -- withdraws the
shortcuts that would skip it, so an override is always the code that runs."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

import judger as judger_package
from judger import Judger, RolloutState
from judger.core.judger import JudgerOutputBatch, JudgerPayloadBatch

pytestmark = pytest.mark.py310

SRC = Path(judger_package.__file__).resolve().parent


class Echo(Judger):
    """Scores 1.0 when the response equals the label; counts the payloads it judges."""

    def __init__(self) -> None:
        super().__init__("echo")
        self.judged: list[int] = []

    async def judge_payload(self, payload: JudgerPayloadBatch) -> JudgerOutputBatch:
        items = payload if isinstance(payload, list) else [payload]
        self.judged.append(len(items))
        out = [{"score": float(p["response"] == p["label"])} for p in items]
        return out if isinstance(payload, list) else out[0]


def states(*responses: str) -> list[RolloutState]:
    return [RolloutState(response=r, reward_model={"ground_truth": "1"}) for r in responses]


async def test_a_subclass_preprocess_and_postprocess_are_the_ones_batch_judge_runs() -> None:
    class Shouting(Echo):
        def preprocess(self, rollout_state: RolloutState) -> dict[str, Any]:
            return {**super().preprocess(rollout_state), "response": (rollout_state.response or "").strip()}

        def postprocess(self, rollout_state: RolloutState, output: dict[str, Any]) -> RolloutState:
            rollout_state.reward = {**output, "seen_by": "Shouting"}
            return rollout_state

    judger = Shouting()
    out = await judger.batch_judge(states(" 1 ", "2"))
    assert [s.reward for s in out] == [
        {"score": 1.0, "seen_by": "Shouting"},
        {"score": 0.0, "seen_by": "Shouting"},
    ]
    single = await judger.judge(states(" 1")[0])
    assert single.reward == {"score": 1.0, "seen_by": "Shouting"}


async def test_a_dedup_key_given_to_one_instance_merges_its_payloads() -> None:
    judger = Echo()
    judger._dedup_key = lambda payload: payload["response"]  # type: ignore[method-assign]
    out = await judger.batch_judge(states("1", "1", "2", "1"))
    assert judger.judged == [2]  # "1" judged once for its three samples
    assert [s.reward for s in out] == [{"score": 1.0}, {"score": 1.0}, {"score": 0.0}, {"score": 1.0}]
    assert out[0].reward is not out[1].reward  # each sample still owns its reward dict


def test_overriding_a_hook_withdraws_the_capabilities_that_skip_it() -> None:
    from judger.core.judger import batch_plan

    class Writes(Echo):
        def postprocess(self, rollout_state: RolloutState, output: dict[str, Any]) -> RolloutState:
            return rollout_state

    class WritesPlainlyAnyway(Writes):
        plain_postprocess = True  # declared again by the class that overrides: kept

        def postprocess(self, rollout_state: RolloutState, output: dict[str, Any]) -> RolloutState:
            return super().postprocess(rollout_state, output)

    assert batch_plan(Echo()).plain_writes and not batch_plan(Writes()).plain_writes
    assert batch_plan(WritesPlainlyAnyway()).plain_writes
    assert not Writes.plain_postprocess and Echo.plain_postprocess  # the parent keeps its own
    one, other = Echo(), Echo()
    one.postprocess = lambda state, output: state  # type: ignore[method-assign]
    assert not batch_plan(one).plain_writes and batch_plan(other).plain_writes


def _identity_checks(tree: ast.AST) -> list[str]:
    """``X.m is Y.m`` comparisons and ``"m" in x.__dict__`` tests: a path chosen by who defines a
    method instead of by what the judger declares."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        for left, op, right in zip([node.left, *node.comparators], node.ops, node.comparators):
            same_attr = (
                isinstance(op, (ast.Is, ast.IsNot))
                and isinstance(left, ast.Attribute)
                and isinstance(right, ast.Attribute)
                and left.attr == right.attr
            )
            in_dict = isinstance(op, (ast.In, ast.NotIn)) and "__dict__" in ast.unparse(right)
            if same_attr or in_dict:
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_no_path_is_chosen_by_method_identity() -> None:
    offenders = {
        str(path.relative_to(SRC)): found
        for path in sorted(SRC.rglob("*.py"))
        if (found := _identity_checks(ast.parse(path.read_text(encoding="utf-8"))))
    }
    assert offenders == {}
