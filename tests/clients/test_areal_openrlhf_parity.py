"""The AReaL and OpenRLHF guides' parity tables, read against the installed AReaL 1.0.4
and OpenRLHF 0.11.2: a field the framework passes or reads that the table misses (or a listed one
it no longer has) fails here."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import textwrap
from collections.abc import Callable

import pytest

Table = dict[tuple[str, ...], str]

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("areal") is None or importlib.util.find_spec("openrlhf") is None,
    reason="AReaL or OpenRLHF is not installed",
)


def test_areal_table_lists_what_its_reward_fn_gets(
    parity_table: Callable[[str], Table], areal_logging: None
) -> None:
    from areal.api.reward_api import reward_fn
    from areal.workflow.rlvr import RLVRWorkflow

    params = inspect.signature(reward_fn).parameters
    named = [p for p, v in params.items() if v.kind is not inspect.Parameter.VAR_KEYWORD]
    table = {key[-1] for key in parity_table("areal")}
    # the rest of the row arrives as keywords (RLVRWorkflow._compute_rewards: **task_data)
    source = textwrap.dedent(inspect.getsource(RLVRWorkflow._compute_rewards))
    calls = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call) and n.keywords]
    assert any(k.arg is None for call in calls for k in call.keywords), "the row is no longer **kwargs"
    assert table == {*named, "dataset columns"}


def test_openrlhf_file_table_lists_what_its_executor_sends_and_reads(
    parity_table: Callable[[str], Table],
) -> None:
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    call = textwrap.dedent(inspect.getsource(SingleTurnAgentExecutor._fetch_rewards_via_func))
    sent = {"queries", "prompts", "labels"}
    assert all(f"{name}_list" in call for name in sent), call
    execute = textwrap.dedent(inspect.getsource(SingleTurnAgentExecutor.execute))
    read = {
        node.args[0].value
        for node in ast.walk(ast.parse(execute))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "rewards_info"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    }
    assert read == {"rewards", "scores", "extra_logs"}
    assert {key[-1] for key in parity_table("openrlhf_file")} == sent | read
