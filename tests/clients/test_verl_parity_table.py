"""The verl guide's field table against the installed verl: every argument and field verl 0.9's
reward-loop managers and trainer hand a reward function or a reward manager, read from verl's own
source, is a row of the table, and every row is still in verl. A verl release that adds one fails
here instead of reaching judger unseen."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from pathlib import Path

import verl

from judger.compat.verl import managers
from judger.compat.verl.default_options import DEFAULT_FN_KWARGS

VERL = Path(verl.__file__).parent
MANAGERS = VERL / "experimental" / "reward_loop" / "reward_manager"
Table = dict[tuple[str, ...], str]


def _is_call_to(node: ast.AST, attr: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == attr


def _const(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _is_manager(node: ast.AST) -> bool:
    return isinstance(node, ast.ClassDef) and any(
        getattr(b, "id", "") == "RewardManagerBase" for b in node.bases
    )


def _fields_of(node: ast.AST) -> set[tuple[str, str]]:
    """(where, field) that one node of a manager class hands on or reads."""
    if isinstance(node, ast.FunctionDef) and node.name == "__init__":
        return {("manager", a.arg) for a in node.args.args[1:] + node.args.kwonlyargs}
    if isinstance(node, ast.Call) and _is_call_to(node, "compute_score"):
        return {("call", k.arg) for k in node.keywords if k.arg}
    if isinstance(node, ast.Assign) and any(
        getattr(t, "id", "") == "extra_reward_kwargs" for t in node.targets
    ):
        dicts = [d for d in ast.walk(node.value) if isinstance(d, ast.Dict)]
        return {("call", key) for d in dicts for key in map(_const, d.keys) if key}  # type: ignore[arg-type]
    if isinstance(node, ast.Subscript) and (key := _const(node.slice)):
        if isinstance(node.ctx, ast.Store) and getattr(node.value, "id", "") == "extra_info":
            return {("extra_info", key)}
        if getattr(node.value, "attr", "") == "non_tensor_batch":
            return {("non_tensor_batch", key)}
    if (
        isinstance(node, ast.Call)
        and _is_call_to(node, "get")
        and node.args
        and (key := _const(node.args[0]))
    ):
        owner = node.func.value  # type: ignore[attr-defined]
        if getattr(owner, "attr", "") == "non_tensor_batch":
            return {("non_tensor_batch", key)}
        if (
            isinstance(owner, ast.Call)
            and _is_call_to(owner, "get")
            and _const(owner.args[0]) == "reward_kwargs"
        ):
            return {("reward_kwargs", key)}
    return set()


def manager_fields(tree: ast.Module) -> set[tuple[str, str]]:
    """(where, field) of one reward-manager module of verl's reward loop."""
    return {
        field for cls in tree.body if _is_manager(cls) for node in ast.walk(cls) for field in _fields_of(node)
    }


def trainer_fields() -> set[tuple[str, str]]:
    """What verl's ``load_reward_manager`` binds on the default scorer from ``reward.sandbox_fusion``."""
    tree = ast.parse((VERL / "trainer" / "ppo" / "reward.py").read_text())
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "load_reward_manager")
    found = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "partial":
            found.update(("sandbox_fusion", k.arg) for k in node.keywords if k.arg)
    return found


def verl_fields() -> set[tuple[str, str]]:
    found = trainer_fields()
    for path in sorted(MANAGERS.glob("*.py")):
        found |= manager_fields(ast.parse(path.read_text()))
    return found


def test_readme_table_lists_every_field_verl_passes(parity_table: Callable[[str], Table]) -> None:
    table = set(parity_table("verl"))
    fields = verl_fields()
    assert len(fields) > 20  # the walk found verl's managers
    assert sorted(fields - table) == [], (
        "verl passes these and the verl guide's table does not say what judger does"
    )
    assert sorted(table - fields) == [], "the verl guide's table lists these and verl no longer passes them"


def test_judger_takes_what_the_table_says_it_uses(parity_table: Callable[[str], Table]) -> None:
    table = parity_table("verl")
    params = set(inspect.signature(managers.NaiveRewardManager.__init__).parameters)
    for (where, field), what in table.items():
        if where == "manager":
            assert field in params, field
        if where == "reward_kwargs":
            assert field in managers.OPTION_NAMES, field
        if where == "sandbox_fusion":
            assert field in DEFAULT_FN_KWARGS, field
        assert what.startswith(("uses", "passes on", "verl's GDPO")), (field, what)
