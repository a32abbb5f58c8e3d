"""The API reference (docs/api/, built by `make docs`) holds every public name, and every public
config field says what it is. Cheap: reads the docs sources and the live classes, builds nothing."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from pydantic import BaseModel

import judger

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

ROOT = Path(__file__).parents[2]
API = ROOT / "docs" / "api"

# the modules users import by name (the guides tell them to); each is rendered whole
PUBLIC_MODULES = (
    "judger.compat.verl",
    "judger.compat.verl.managers",
    "judger.compat.verl.reward_managers",
    "judger.compat.trl",
    "judger.compat.slime",
    "judger.compat.nemo_rl",
    "judger.compat.areal",
    "judger.compat.roll",
    "judger.compat.rllm",
    "judger.compat.openrlhf",
    "judger.trainer",
    "judger.verifiers",
    "judger.remote",
    "judger.testing",
    "judger.testing.adversary",
    "judger.testing.fake_openai",
    "judger.testing.hostile_openai",
    "judger.testing.fake_sandbox_fusion",
)
# the other modules of the packages users import from, and why a user never imports them
INTERNAL = {
    "judger.compat.scoring": "the adapters' shared judging of a batch",
    "judger.compat.source": "the adapters' loading of a judger by name (JUDGER_CONFIG)",
    "judger.compat.special_tokens": "the adapters' removal of special-token text",
    "judger.testing.grader_replies": "replies of the fake grader servers",
    "judger.testing.handlers": "reward handlers of judger's own tests",
    "judger.testing.processes": "process helpers of judger's own tests",
    "judger.testing.ray": "Ray helpers of judger's own tests",
    "judger.testing.rows": "rollout files of judger's own `judger score` tests",
    "judger.testing.server_process": "`judger serve` in a subprocess, for judger's own tests",
    "judger.testing.servers": "served by judger.testing (LoopbackServer, serve_asgi)",
    "judger.testing.xtuner": "XTuner's test layout, for judger's own XTuner tests",
}
# packages whose modules are each public or internal (a new adapter must be one or the other)
SORTED_PACKAGES = ("judger.compat", "judger.testing")
# packages serving their names lazily (a module __getattr__): the names are also imported under
# TYPE_CHECKING, where the API reference (and type checkers) read them
LAZY = {
    "judger": "_LAZY",
    "judger.trainer": "_NAMES",
    "judger.remote": "_NAMES",
    "judger.compat.verl": "_LAZY",
}


def entries() -> set[str]:
    """The objects the reference renders: every ``::: path`` line of docs/api/."""
    found = set()
    for page in API.glob("*.md"):
        found.update(re.findall(r"^::: (\S+)$", page.read_text(encoding="utf-8"), re.M))
    return found


def test_every_name_of_judger_all_has_its_entry() -> None:
    missing = sorted(name for name in judger.__all__ if f"judger.{name}" not in entries())
    assert missing == [], f"add '::: judger.NAME' to a page of docs/api/ for {missing}"


def test_every_public_module_has_its_entry() -> None:
    missing = sorted(set(PUBLIC_MODULES) - entries())
    assert missing == [], f"add '::: MODULE' to a page of docs/api/ for {missing}"


@pytest.mark.parametrize("package", SORTED_PACKAGES)
def test_each_module_users_could_import_is_public_or_named_internal(package: str) -> None:
    modules = {f"{package}.{m.name}" for m in pkgutil.iter_modules(importlib.import_module(package).__path__)}
    unsorted = sorted(modules - set(PUBLIC_MODULES) - set(INTERNAL))
    assert unsorted == [], (
        f"document these in docs/api/ and PUBLIC_MODULES, or say in INTERNAL why not: {unsorted}"
    )
    assert not set(PUBLIC_MODULES) & set(INTERNAL)


def public_objects(module: ModuleType) -> dict[str, Any]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [
            n
            for n, v in vars(module).items()
            if not n.startswith("_") and getattr(v, "__module__", None) == module.__name__
        ]
    return {f"{module.__name__}.{n}": getattr(module, n) for n in names}


def public_models() -> dict[str, type[BaseModel]]:
    objects = public_objects(judger)
    for name in PUBLIC_MODULES:
        objects.update(public_objects(importlib.import_module(name)))
    return {
        path: obj
        for path, obj in objects.items()
        if inspect.isclass(obj) and issubclass(obj, BaseModel) and obj.__module__.startswith("judger.")
    }


def test_the_public_models_are_found() -> None:
    models = public_models()
    for expected in ("judger.JudgerConfig", "judger.RolloutState", "judger.trainer.SampleParams"):
        assert expected in models
    assert "judger.verifiers.LLMJudgerConfig" in models and len(models) >= 20


@pytest.mark.parametrize(("path", "model"), sorted(public_models().items()))
def test_every_public_model_field_has_a_description(path: str, model: type[BaseModel]) -> None:
    """The API reference's field tables read these (``Field(..., description=...)``); a field that
    overrides an inherited one keeps a description of its own, as pydantic does not inherit it."""
    bare = sorted(name for name, field in model.model_fields.items() if not (field.description or "").strip())
    assert bare == [], f"{path}: give these fields a description: {bare}"


def type_checking_names(package: str) -> set[str]:
    source = Path(importlib.import_module(package).__file__ or "").read_text(encoding="utf-8")
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for stmt in ast.walk(node):
                if isinstance(stmt, ast.ImportFrom):
                    names.update(alias.asname or alias.name for alias in stmt.names)
    return names


@pytest.mark.parametrize(("package", "table"), sorted(LAZY.items()))
def test_lazy_names_are_declared_for_the_reference(package: str, table: str) -> None:
    """A lazily served name the reference cannot see statically would render as nothing."""
    module = importlib.import_module(package)
    lazy = set(getattr(module, table))
    assert type_checking_names(package) == lazy
    assert lazy <= set(module.__all__)
