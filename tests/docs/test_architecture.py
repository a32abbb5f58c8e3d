"""docs/architecture.md against the tree: every module of the package is named in the module table,
every file the table names exists, and the doc points at nothing outside the repository.

A module is named by its whole path (``judgers/merge.py``) in any row, or in a row whose first cell
is its package (``cli/``) by its path from that package (``viewer/app.py``), or by its file name
where the row also names its folder."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "judger"
DOC = ROOT / "docs" / "architecture.md"
_CODE = re.compile(r"`([^`\s]+)`")


def _rows() -> list[tuple[list[str], list[str]]]:
    """The module table's rows: the paths of the first cell, and every code span of the row."""
    rows = []
    for line in DOC.read_text().splitlines():
        cells = line.split("|")
        if len(cells) < 4 or not cells[1].strip().startswith("`"):
            continue
        heads = _CODE.findall(cells[1])
        # a first cell may name several modules of one folder: `compat/slime.py`, `nemo_rl.py`
        folder = heads[0].rpartition("/")[0] + "/" if "/" in heads[0] else ""
        heads = [h if "/" in h or not folder else folder + h for h in heads]
        rows.append((heads, _CODE.findall(line)))
    return rows


def _modules() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if path.name == "__init__.py" and rel != "__init__.py":
            rel = rel[: -len("__init__.py")]  # a package: named by its folder
        found.append(rel)
    return found


def _named(module: str, rows: list[tuple[list[str], list[str]]]) -> bool:
    if module.endswith("/") and any(h.startswith(module) and h != module for hs, _ in rows for h in hs):
        return True  # a package whose modules have rows of their own
    for heads, spans in rows:
        if module in spans:  # named by its whole path in any row
            return True
        for head in heads:
            if module == head:
                return True
            if not (head.endswith("/") and module.startswith(head)):
                continue
            rest = module[len(head) :]
            if rest in spans:
                return True
            folder, _, name = rest.rstrip("/").rpartition("/")
            name = name + "/" if rest.endswith("/") else name
            if name in spans and (not folder or folder + "/" in spans or f"{folder}/{name}" in spans):
                return True
    return False


def test_every_module_of_the_package_is_named_in_the_module_table() -> None:
    rows = _rows()
    assert rows, "docs/architecture.md has no module table"
    top = ("__init__.py", "__main__.py")
    missing = [m for m in _modules() if m not in top and not _named(m, rows)]
    assert not missing, f"modules docs/architecture.md's table does not name: {missing}"


def test_every_path_the_table_names_exists() -> None:
    stale = []
    for heads, _spans in _rows():
        for head in heads:
            if not (PACKAGE / head).exists():
                stale.append(head)
    assert not stale, f"docs/architecture.md names modules that are not in src/judger: {stale}"


def test_the_doc_points_at_nothing_outside_the_repository() -> None:
    text = DOC.read_text()
    for target in re.findall(r"\]\(([^)#]+)", text) + re.findall(r"`((?:\.\./|shared/)[^`]*)`", text):
        if "://" in target:
            continue
        assert (DOC.parent / target).resolve().is_relative_to(ROOT), f"{target} is outside the repository"
        assert (DOC.parent / target).exists(), f"{target} does not exist"
