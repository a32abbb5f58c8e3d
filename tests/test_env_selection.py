"""`make test-py310` and the second half of `make test-clients` run only the test files marked
``py310`` / ``clients_env`` (the rule is in the Makefile). This guard keeps every test file that
touches what can differ there marked, so those runs do not silently cover less as tests are added:
a file is "touching" when it imports (anywhere in it, or through a sibling helper it imports) one of
the surfaces below, names a public judger class defined there, or carries one of the text marks."""

from __future__ import annotations

import ast
import importlib
import re
import sys
from functools import cache
from pathlib import Path

import pytest

import judger

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

TESTS = Path(__file__).parent
SRC = TESTS.parent / "src" / "judger"
# their own tiers, each in the one environment it is about
OWN_TIERS = ("browser", "clients", "serving", "llama_cpp")

# module prefixes: a third-party package, or a judger module or package
SURFACES: dict[str, tuple[str, ...]] = {
    "py310": (
        # parsing: LaTeX, sympy and the graders built on them
        "sympy", "latex2sympy2_extended", "math_verify", "antlr4", "mathruler", "pylatexenc",
        # packages whose newest releases need Python 3.11: the 3.10 environment resolves older ones
        "numpy", "pyarrow",
        # backports, and judger code that branches on the interpreter
        "tomllib", "tomli", "typing_extensions", "exceptiongroup",
        "judger.core.deadlines", "judger.server.guard",
        # judger's parsing: answer extraction and grading, verdicts, rows, user code it loads
        "judger.scorers", "judger.presets", "judger.compat", "judger.verifiers.verdicts",
        "judger.trainer.io", "judger.trainer.metrics",
    ),
    "clients_env": (
        # hydra-core (so verl) pins antlr4-python3-runtime 4.9.3, under latex2sympy: MATH grading
        "antlr4", "latex2sympy2_extended", "math_verify",
        "judger.scorers.math", "judger.presets.math", "judger.presets.math_verify", "judger.presets.geo3k",
        # judger code that takes another path where the trainers' packages are installed
        "judger.compat", "judger.trainer.tokenizer",
        "omegaconf", "hydra", "torch", "transformers", "tokenizers", "verl", "trl",
    ),
}  # fmt: skip

# text that reaches a surface without an import: the test branches on the interpreter, runs
# `judger` on bundled data or a preset in a process of its own, or loads a tokenizer (transformers
# is installed in the trainers' environment only)
TEXT_MARKS: dict[str, tuple[str, ...]] = {
    "py310": ("sys.version_info", "math_rollouts_dev", "gsm8k_test.jsonl", "--preset"),
    "clients_env": ("math_rollouts_dev", "hf_checkpoint", "tokenizer"),
}

# every file in these folders: they test the judging loop, whose deadline is asyncio.timeout on
# 3.11+ and judger's own fallback on 3.10 (core/deadlines.py), and parsing
SURFACE_DIRS: dict[str, tuple[str, ...]] = {
    "py310": ("core", "judgers", "scorers", "presets", "compat"),
    "clients_env": (),
}

# files that touch a surface only as a stand-in for what they test, which does not depend on it
EXEMPT: dict[str, dict[str, str]] = {
    "py310": {
        "remote/test_remote_equality.py": "remote results equal local ones, both on one interpreter; "
        "Ray is the same release in every environment",
        "runtime/test_sandbox_privilege.py": "what the kernel (uids, namespaces, cgroups, seccomp) lets "
        "a judged program reach; the programs make the system calls themselves",
        "runtime/test_sandbox_hostile.py": "the kernel boundary again: hostile programs escape the audit "
        "hook into a fresh interpreter and meet bubblewrap's namespaces and the worker's seccomp filter; "
        "the code preset only carries them there (its parsing is covered by presets/test_code_*.py)",
        "cli/test_view_live.py": "the page served while a worker process indexes the file: process "
        "lifecycle, the index cache and HTTP; its figures are judger score's, whose tests run here",
        "cli/test_eval_hostile.py": "GSM8K's file gives prompts only; the bounds are httpx's reads "
        "(runtime/bounded), the same release everywhere",
        "trainer/test_controller.py": "the GSM8K judger is a stand-in; it tests where requests go "
        "(balancing, failures, recovery) over httpx, the same release everywhere",
        "cli/test_score_ray.py": "where blocks run (Ray actors on two nodes, a node lost); what a block's "
        "scoring parses is the shards' (cli/test_score_shards.py, marked); Ray is one release everywhere",
        "cli/test_eval_ray.py": "where samples are judged (a JudgerPool on two nodes, a node lost); the "
        "eval's own reading and judging are cli/test_eval.py's (marked); Ray is one release everywhere",
    },
    "clients_env": {
        "cli/test_view_live.py": "the page served while a worker process indexes the file: process "
        "lifecycle, the index cache and HTTP; its figures are judger score's, whose tests run here",
    },
}


def _covers(module: str, surfaces: tuple[str, ...]) -> bool:
    return any(module == s or module.startswith(s + ".") for s in surfaces)


def _home(module: str, name: str) -> str | None:
    """Where ``module.name`` is defined: the submodule itself, or an object's ``__module__``."""
    try:
        value = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None
    if isinstance(value, type(sys)):
        return value.__name__
    return getattr(value, "__module__", None)


def _imports(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            if node.module.split(".")[0] == "judger":
                found.update(filter(None, (_home(node.module, alias.name) for alias in node.names)))
        elif (
            isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "judger"
        ):
            found.update(filter(None, [_home("judger", node.attr)]))
    return found


def _siblings(path: Path, tree: ast.AST) -> list[Path]:
    """The helper modules next to a test file that it imports relatively (``from .helpers import``)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            helper = path.parent / f"{node.module.replace('.', '/')}.py"
            if helper.is_file():
                found.append(helper)
    return found


@cache
def _public_names(marker: str) -> tuple[str, ...]:
    """judger's public names defined on a surface: a test can name one in a config it writes."""
    return tuple(name for name in judger.__all__ if _covers(_home("judger", name) or "", SURFACES[marker]))


def touches(path: Path, marker: str) -> list[str]:
    """What ``path`` touches of ``marker``'s surfaces (empty when nothing)."""
    if path.relative_to(TESTS).parts[0] in SURFACE_DIRS[marker]:
        return [f"tests/{path.relative_to(TESTS).parts[0]}/"]
    text = path.read_text()
    tree = ast.parse(text)
    sources = [(text, tree)] + [(h.read_text(), ast.parse(h.read_text())) for h in _siblings(path, tree)]
    hits: set[str] = set()
    for source, module_tree in sources:
        hits.update(m for m in _imports(module_tree) if _covers(m, SURFACES[marker]))
        hits.update(mark for mark in TEXT_MARKS[marker] if mark in source)
        hits.update(n for n in _public_names(marker) if re.search(rf"\b{n}\b", source))
    return sorted(hits)


def file_markers(path: Path) -> set[str]:
    """The ``pytest.mark.<name>`` markers of a file's module-level ``pytestmark``."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            return {
                sub.attr
                for sub in ast.walk(node.value)
                if isinstance(sub, ast.Attribute)
                and isinstance(sub.value, ast.Attribute)
                and sub.value.attr == "mark"
            }
    return set()


def _test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if p.relative_to(TESTS).parts[0] not in OWN_TIERS)


@pytest.mark.parametrize("marker", sorted(SURFACES))
def test_every_file_touching_a_surface_is_marked(marker: str) -> None:
    unmarked = {
        str(p.relative_to(TESTS)): hits
        for p in _test_files()
        if marker not in file_markers(p)
        and p.relative_to(TESTS).as_posix() not in EXEMPT[marker]
        and (hits := touches(p, marker))
    }
    assert unmarked == {}, (
        f"add pytest.mark.{marker} to these files' pytestmark (what they touch): {unmarked}"
    )


def test_the_guard_sees_what_it_guards() -> None:
    """Each way of touching a surface is seen, on files whose contents are known."""
    assert "judger.scorers.math.grade" in touches(
        TESTS / "scorers" / "test_math_without_latex_parser.py", "clients_env"
    )
    assert "numpy" in touches(TESTS / "trainer" / "test_metrics.py", "py310")
    # a public name imported from judger resolves to the module defining it
    assert "judger.presets.math" in touches(TESTS / "presets" / "test_math_judgers.py", "clients_env")
    # a relative helper's imports count for the file importing it
    assert "sys.version_info" in touches(TESTS / "runtime" / "test_hostile_suite.py", "py310")
    assert touches(TESTS / "remote" / "test_pool_dispatch.py", "clients_env") == []
    assert file_markers(Path(__file__)) == {"py310", "clients_env"}
    for marker, exempt in EXEMPT.items():
        stale = [name for name in exempt if not touches(TESTS / name, marker)]
        assert stale == [], f"{marker}: these exemptions no longer touch a surface, remove them: {stale}"


def test_every_source_file_compiles_here() -> None:
    """Syntax on this interpreter for every file, also the ones no test imports (the programs the
    sandbox runs inside, helpers, the tests this run deselects)."""
    for path in sorted([*SRC.rglob("*.py"), *TESTS.rglob("*.py")]):
        compile(path.read_text(), str(path), "exec", dont_inherit=True)
