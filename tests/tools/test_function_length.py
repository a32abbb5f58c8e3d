"""tools/function_length.py, the length gate `make lint` runs: what it reports, and that src/ passes it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("function_length", ROOT / "tools" / "function_length.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _function(name: str, body_lines: int, indent: str = "") -> str:
    body = "".join(f"{indent}    x{i} = {i}\n" for i in range(body_lines))
    return f"{indent}def {name}() -> None:\n{body}"


def test_a_function_over_the_limit_is_found_by_its_qualified_name() -> None:
    tool = _tool()
    source = (
        _function("short", 10)
        + _function("exactly", tool.MAX_LINES - 1)
        + "class Box:\n"
        + _function("method", tool.MAX_LINES, indent="    ")
        + "def outer() -> None:\n"
        + _function("inner", tool.MAX_LINES + 5, indent="    ")
    )
    found = tool.long_functions(source, "pkg/mod.py")
    assert found == {
        "pkg/mod.py::Box.method": tool.MAX_LINES + 1,
        "pkg/mod.py::outer": tool.MAX_LINES + 7,
        "pkg/mod.py::outer.inner": tool.MAX_LINES + 6,
    }


def test_only_listed_functions_may_be_long_and_a_stale_entry_is_reported() -> None:
    tool = _tool()
    found = {"a.py::long_one": 90, "a.py::excused": 120}
    allowed = tool.read_allow_list(
        "# comment\n\na.py::excused  # builds one table, row by row\na.py::gone  # was long once\n"
    )
    assert allowed == {"a.py::excused": "builds one table, row by row", "a.py::gone": "was long once"}
    report = tool.problems(found, allowed)
    assert len(report) == 2
    assert report[0].startswith("a.py::long_one: 90 lines")
    assert report[1].startswith("a.py::gone: listed")


def test_an_entry_without_a_reason_is_refused() -> None:
    tool = _tool()
    with pytest.raises(ValueError, match="line 2"):
        tool.read_allow_list("a.py::fine  # why\na.py::no_reason\n")


def test_src_passes_the_gate() -> None:
    tool = _tool()
    found: dict[str, int] = {}
    for file in sorted((ROOT / "src").rglob("*.py")):
        found.update(tool.long_functions(file.read_text(encoding="utf-8"), file.relative_to(ROOT).as_posix()))
    allowed = tool.read_allow_list(tool.ALLOW_LIST.read_text(encoding="utf-8"))
    assert tool.problems(found, allowed) == []
