"""No function under src/ longer than MAX_LINES lines, counted from its ``def`` to its last line.

ruff has no rule for a function's length (``PLR0915`` counts statements, ``C901`` branches), so
``make lint`` runs this. A function may stay longer only when ``tools/function_length_allow.txt``
lists it, as ``path::qualified.name  # the reason``; an entry that no longer matches a long function
is reported too, so the list cannot outlive what it excuses.

    python tools/function_length.py [ROOT ...]      (default: src)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

MAX_LINES = 80
ALLOW_LIST = Path(__file__).with_name("function_length_allow.txt")


def long_functions(source: str, path: str, max_lines: int = MAX_LINES) -> dict[str, int]:
    """``{"path::qualified.name": lines}`` of the functions in ``source`` longer than ``max_lines``."""
    found: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    lines = (child.end_lineno or child.lineno) - child.lineno + 1
                    if lines > max_lines:
                        found[f"{path}::{name}"] = lines
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(source, filename=path), "")
    return found


def read_allow_list(text: str) -> dict[str, str]:
    """``{"path::qualified.name": reason}``; blank lines and whole-line comments are skipped, and an
    entry without a reason is an error."""
    allowed: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, _, reason = (part.strip() for part in line.partition("#"))
        if "::" not in key or not reason:
            raise ValueError(f"line {number}: {raw!r}: write `path::function  # why it may be long`")
        allowed[key] = reason
    return allowed


def problems(found: dict[str, int], allowed: dict[str, str], max_lines: int = MAX_LINES) -> list[str]:
    """One line per function too long and not allowed, and per allowed entry that excuses nothing."""
    out = [
        f"{key}: {lines} lines (more than {max_lines}): split it, or list it with why in {ALLOW_LIST.name}"
        for key, lines in sorted(found.items())
        if key not in allowed
    ]
    out += [
        f"{key}: listed in {ALLOW_LIST.name} but not a function over {max_lines} lines: drop the entry"
        for key in sorted(allowed)
        if key not in found
    ]
    return out


def main(argv: list[str]) -> int:
    roots = [Path(a) for a in argv] or [Path("src")]
    found: dict[str, int] = {}
    for root in roots:
        for file in sorted(root.rglob("*.py")):
            found.update(long_functions(file.read_text(encoding="utf-8"), file.as_posix()))
    try:
        allowed = read_allow_list(ALLOW_LIST.read_text(encoding="utf-8"))
    except ValueError as exc:
        print(f"{ALLOW_LIST}: {exc}", file=sys.stderr)
        return 1
    report = problems(found, allowed)
    for line in report:
        print(line, file=sys.stderr)
    return 1 if report else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
