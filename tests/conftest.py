"""Shared fixtures: a real local Ray cluster (started once per session when a test asks for it),
fake OpenAI-compatible graders on 127.0.0.1, and small verl-layout rows and files."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from judger.core.rollout import RolloutState, Status
from judger.testing import serve_asgi
from judger.testing.fake_openai import FakeOpenAI, LlamaCppFake


def pytest_configure(config: pytest.Config) -> None:
    # A suite that a script starts in the background inherits SIGINT ignored, and so would every
    # process the Ctrl-C tests start: they test Ctrl-C, so the suite takes it as a terminal gives it.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[object]:
    """A local Ray with this machine's CPUs (joined, not restarted, if one is already up)."""
    ray = pytest.importorskip("ray")
    started = False
    if not ray.is_initialized():
        os.environ.pop("RAY_ADDRESS", None)
        ray.init(
            num_cpus=max(2, os.cpu_count() or 2),
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
        started = True
    yield ray
    if started:
        ray.shutdown()


def _served(fake: FakeOpenAI) -> Iterator[tuple[FakeOpenAI, str]]:
    with serve_asgi(fake.app, timeout_graceful_shutdown=1) as server:
        yield fake, server.url
        fake.release()


@pytest.fixture
def fake_grader() -> Iterator[tuple[FakeOpenAI, str]]:
    """One fake grader and its base URL."""
    yield from _served(FakeOpenAI())


@pytest.fixture
def llama_grader() -> Iterator[tuple[FakeOpenAI, str]]:
    """A fake grader that behaves as llama.cpp's server does, and its base URL."""
    yield from _served(LlamaCppFake())


@pytest.fixture
def two_graders() -> Iterator[list[tuple[FakeOpenAI, str]]]:
    fakes = [FakeOpenAI(), FakeOpenAI()]
    with (
        serve_asgi(fakes[0].app, timeout_graceful_shutdown=1) as a,
        serve_asgi(fakes[1].app, timeout_graceful_shutdown=1) as b,
    ):
        yield [(fakes[0], a.url), (fakes[1], b.url)]
        for fake in fakes:
            fake.release()


@pytest.fixture
def make_state() -> Callable[..., RolloutState]:
    def make(
        response: str | None, label: Any, question: str = "What is 2 + 3?", status: Status = Status.COMPLETED
    ) -> RolloutState:
        return RolloutState(
            message=[{"role": "user", "content": question}],
            response=response,
            reward_model={"ground_truth": label},
            status=status,
        )

    return make


def verl_row(
    answer: str, truth: str, uid: str | None = "u0", source: str = "toy", **extra: Any
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "data_source": source,
        "prompt": [{"role": "user", "content": f"what is {truth}?"}],
        "response": answer,
        "reward_model": {"style": "rule", "ground_truth": truth},
        "extra_info": {"index": 0},
    }
    if uid is not None:
        row["uid"] = uid
    row.update(extra)
    return row


@pytest.fixture
def write_jsonl(tmp_path: Path) -> Callable[..., Path]:
    def write(lines: list[Any], name: str = "rollouts.jsonl") -> Path:
        path = tmp_path / name
        with path.open("w") as fh:
            for line in lines:
                fh.write(line if isinstance(line, str) else json.dumps(line))
                fh.write("\n")
        return path

    return write


@pytest.fixture
def row() -> Callable[..., dict[str, Any]]:
    return verl_row


@pytest.fixture
def exact_match_config(tmp_path: Path) -> Path:
    """A config file scoring with judger.testing.handlers:exact_match."""
    path = tmp_path / "em_config.py"
    path.write_text(
        "from judger import JudgerConfig\n"
        "judger_config = JudgerConfig(\n"
        "    judger_name='em', reward_handler='judger.testing.handlers:exact_match'\n"
        ")\n"
    )
    return path


def _after_marker(marker: str) -> str:
    """The text after ``marker`` (an HTML comment such as ``<!-- parity: verl -->``) in the one
    page of the docs (docs/**/*.md, or the README) that holds it: a marker found twice or nowhere
    fails, so a guide's table or snippet is checked wherever it moves, and never two copies."""
    root = Path(__file__).parents[1]
    pages = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    hits = [(page, text) for page in pages if marker in (text := page.read_text(encoding="utf-8"))]
    assert len(hits) == 1, f"{marker} found in {[str(p.relative_to(root)) for p, _ in hits] or 'no page'}"
    text = hits[0][1]
    assert text.count(marker) == 1, f"{marker} found twice in {hits[0][0]}"
    return text[text.index(marker) + len(marker) :]


@pytest.fixture(scope="session")
def after_marker() -> Callable[[str], str]:
    """Reads the docs after a marker (see :func:`_after_marker`)."""
    return _after_marker


def _parity_table(name: str) -> dict[tuple[str, ...], str]:
    """The docs' ``<!-- parity: name -->`` table: ``{(where..., field): what judger does}``; the
    field is the backticked name (a row without one, such as "dataset columns", keys by its text)."""
    lines = _after_marker(f"<!-- parity: {name} -->").splitlines()[1:]
    rows: dict[tuple[str, ...], str] = {}
    for line in lines[2:]:  # after the header and its separator
        if not line.strip().startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        key = tuple(cell.strip("`") for cell in cells[:-1])
        assert key not in rows, f"parity table {name!r}: {key} listed twice"
        rows[key] = cells[-1]
    assert rows, f"parity table {name!r} is empty"
    return rows


@pytest.fixture(scope="session")
def parity_table() -> Callable[[str], dict[tuple[str, ...], str]]:
    """Reads a parity table of the docs (see :func:`_parity_table`)."""
    return _parity_table


def _readme_snippet(name: str, **placeholders: str) -> str:
    """The docs' ``<!-- snippet: name -->`` Python block, as written but for its placeholder
    lines: each ``NAME = ...`` line named in ``placeholders`` gets that right-hand side (Python
    source); every one must be found, so a renamed placeholder fails the test."""
    block = _after_marker(f"<!-- snippet: {name} -->").split("```python\n", 1)[1].split("```", 1)[0]
    lines = block.splitlines()
    for key, value in placeholders.items():
        hits = [i for i, line in enumerate(lines) if line.startswith(f"{key} = ")]
        assert len(hits) == 1, f"snippet {name!r}: placeholder {key} found {len(hits)} times"
        lines[hits[0]] = f"{key} = {value}"
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="session")
def readme_snippet() -> Callable[..., str]:
    """Reads a snippet of the docs with its placeholders set (see :func:`_readme_snippet`)."""
    return _readme_snippet
