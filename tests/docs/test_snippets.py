"""The docs' code runs: every Python block of docs/ (and the README) says whether and how it is
run, and the blocks marked ``<!-- run -->`` run here, as written, in a fresh interpreter (bash
blocks so marked too, in a shell whose PATH starts with this environment's scripts, from the
repository root).

A Python block carries one of three marks, on the line before its fence:

- ``<!-- run -->``: run here; it must exit 0 within two minutes;
- ``<!-- run: skip REASON -->``: needs what a test machine lacks (a GPU, a cluster, the trainer's
  own job); collected here as a skipped test giving REASON;
- ``<!-- snippet: NAME -->``: run, with its placeholders set, by the test that reads that snippet
  (``readme_snippet`` in tests/conftest.py), since it needs a server or a model that test provides.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
MARK = re.compile(r"<!-- (run|run: skip (?P<reason>.+?)|snippet: \S+) -->\s*$")


class Block(NamedTuple):
    page: str
    line: int
    language: str
    code: str
    mark: str | None
    reason: str | None

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def blocks() -> list[Block]:
    found = []
    for path in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        for fence in FENCE.finditer(text):
            line = text.count("\n", 0, fence.start()) + 1
            before = text[: fence.start()].rstrip("\n").rsplit("\n", 1)[-1]
            mark = MARK.search(before)
            found.append(
                Block(
                    str(path.relative_to(ROOT)),
                    line,
                    fence.group(1),
                    fence.group(2),
                    mark.group(1).split(":")[0] if mark else None,
                    mark.group("reason") if mark else None,
                )
            )
    return found


def test_every_python_block_says_how_it_is_run() -> None:
    unmarked = [b.name for b in blocks() if b.language == "python" and b.mark is None]
    marks = "<!-- run -->, <!-- run: skip REASON --> or <!-- snippet: NAME -->"
    assert unmarked == [], f"mark these {marks}: {unmarked}"


def test_the_collector_finds_the_marked_blocks() -> None:
    marks = {b.mark for b in blocks()}
    assert {"run", "snippet"} <= marks and sum(b.mark == "run" for b in blocks()) >= 5


RUN = [b for b in blocks() if b.mark == "run"]  # skip marks included: collected, then skipped


@pytest.mark.parametrize("block", RUN, ids=[b.name for b in RUN])
def test_a_runnable_block_runs(block: Block, tmp_path: Path) -> None:
    if block.reason is not None:
        pytest.skip(block.reason)
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    if block.language == "python":
        command = [sys.executable, "-c", block.code]
        cwd = tmp_path
    elif block.language in ("bash", "sh"):
        command = ["bash", "-euo", "pipefail", "-c", block.code]
        cwd = ROOT
    else:
        pytest.fail(f"{block.name}: only python and bash blocks run, not {block.language!r}")
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{block.name} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    shown = printed(block)
    if shown:  # what the page says the prints give, as a reader would compare it
        assert done.stdout.splitlines()[: len(shown)] == shown, f"{block.name} prints otherwise"


def printed(block: Block) -> list[str]:
    """The outputs a Python block shows in comments (``print(x)  # {'score': 1.0}``), when it shows
    one for every top-level print and each is a Python literal; else none."""
    if block.language != "python":
        return []
    prints = re.findall(r"^print\(.*?\)(?:\s+# (.*))?$", block.code, re.M)
    if not prints or not all(p and p[0] in "{[('\"-0123456789" for p in prints):
        return []
    return list(prints)
