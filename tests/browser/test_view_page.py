"""`judger view` in a real browser: Chromium driven by Playwright, in its own environment.

Run by ``make test-browser`` (which ``make test`` calls): Playwright lives in ``.venv-browser`` and
drives the system Chromium (``CHROMIUM``, else ``chromium`` on PATH); judger runs in its own
environment (``JUDGER_PYTHON``, else this interpreter), as a user starts it. The main suite skips
this module when Playwright is not installed. With ``JUDGER_SCREENSHOTS=DIR`` the views are saved
as PNGs there (docs/tasks/view.md's screenshots come from ``DIR=docs/img``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sync_api = pytest.importorskip("playwright.sync_api")

ROOT = Path(__file__).resolve().parents[2]
MATH = ROOT / "src" / "judger" / "data" / "math_rollouts_dev.jsonl"
PYTHON = os.environ.get("JUDGER_PYTHON") or sys.executable
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
SHOTS = os.environ.get("JUDGER_SCREENSHOTS")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _score(out: Path, *extra: str) -> dict[str, Any]:
    command = [PYTHON, "-m", "judger", "score", str(MATH), "--format", "json", "--no-progress"]
    proc = subprocess.run(
        [*command, "-o", str(out), *extra], capture_output=True, text=True, timeout=600, env=_env()
    )
    assert proc.returncode == 0, proc.stderr
    summary: dict[str, Any] = json.loads(proc.stdout)
    return summary


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """`judger view default.jsonl verl.jsonl` (the bundled MATH rollouts scored both ways), running."""
    tmp = tmp_path_factory.mktemp("browser")
    default, verl = tmp / "default.jsonl", tmp / "verl.jsonl"
    summary = _score(default)
    _score(verl, "--compat", "verl")
    proc = subprocess.Popen(
        [PYTHON, "-m", "judger", "view", str(default), str(verl), "--no-browser", "--cache-dir", str(tmp)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        assert proc.stdout is not None
        match = re.search(r"http://127\.0\.0\.1:\d+/", proc.stdout.readline())
        assert match, proc.stderr.read() if proc.stderr else ""
        yield {"url": match.group(0), "summary": summary, "default": _rows(default), "verl": _rows(verl)}
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM:
        pytest.fail("no Chromium: apt-get install chromium, or set CHROMIUM=/path/to/chromium")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser: Any, served: dict[str, Any]) -> Iterator[Any]:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
    page.on("response", lambda r: errors.append(f"{r.status}: {r.url}") if r.status >= 400 else None)
    page.errors = errors
    for _ in range(100):  # the server may still be starting
        try:
            page.goto(served["url"])
            break
        except sync_api.Error:
            time.sleep(0.2)
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    yield page
    page.close()


def test_the_page_loads_with_no_console_errors(page: Any) -> None:
    page.wait_for_timeout(300)
    assert page.errors == []
    if SHOTS:
        page.screenshot(path=str(Path(SHOTS) / "view-summary.png"), full_page=True)


def test_summary_figures_shown_equal_judger_score_json(page: Any, served: dict[str, Any]) -> None:
    _assert_summary_shown(page, served["summary"])


def _assert_summary_shown(page: Any, summary: dict[str, Any]) -> None:
    expected = summary["data_sources"]
    cells = page.query_selector_all("#summary-table td[data-field]")
    assert len(cells) == len(expected) * 10
    for cell in cells:
        row = expected[cell.get_attribute("data-source")]
        field = cell.get_attribute("data-field")
        value = row["at_n"][field[5:]] if field.startswith("at_n.") else row[field]
        assert json.loads(cell.get_attribute("data-value")) == value
        shown = cell.inner_text()
        rates = field in ("mean_score", "accuracy") or field.startswith("at_n.")
        assert shown == ("-" if value is None else f"{value:.4f}" if rates else str(value))
    # the three plots of each data_source were drawn
    assert len(page.query_selector_all(".plots .uplot")) == 3 * len(expected)


def test_filters_change_the_counts(page: Any, served: dict[str, Any]) -> None:
    rows = served["default"]
    wrong = sum(1 for r in rows if not r["reward"]["acc"])
    page.click("nav button[data-tab=samples]")
    page.click("#verdicts button[data-verdict=wrong]")
    page.wait_for_selector(f"#sample-count[data-total='{wrong}']")
    assert len(page.query_selector_all("#sample-table tbody tr")) == wrong
    assert all(c.inner_text() == "wrong" for c in page.query_selector_all("#sample-table td[data-verdict]"))
    page.click("#verdicts button[data-verdict='']")
    word = "triangle"
    hits = sum(1 for r in rows if word in r["prompt"][-1]["content"].lower() or word in r["response"].lower())
    page.fill("#filters input[name=q]", word)
    page.wait_for_selector(f"#sample-count[data-total='{hits}']")
    page.fill("#filters input[name=q]", "")
    page.fill("#filters input[name=min_score]", "0.5")
    page.wait_for_selector(f"#sample-count[data-total='{len(rows) - wrong}']")


def test_group_view_shows_all_n_samples_with_latex_rendered(page: Any, served: dict[str, Any]) -> None:
    page.click("nav button[data-tab=samples]")
    page.wait_for_selector("#sample-table tbody tr")
    # LaTeX in the table's prompts and responses became KaTeX markup
    assert page.query_selector_all("#sample-table .katex")
    page.click("#sample-table tbody tr[data-id='8']")
    page.wait_for_selector("#group-cards .card")
    uid = served["default"][8]["uid"]
    n = sum(1 for r in served["default"] if r["uid"] == uid)
    assert len(page.query_selector_all("#group-cards .card")) == n == 8
    assert page.query_selector_all("#group .katex")
    assert page.errors == []
    if SHOTS:
        page.screenshot(path=str(Path(SHOTS) / "view-group.png"), full_page=False)


def test_diff_view_finds_the_verdicts_verl_mode_flips(page: Any, served: dict[str, Any]) -> None:
    default, verl = served["default"], served["verl"]
    differ = sum(1 for a, b in zip(default, verl) if bool(a["reward"]["acc"]) != bool(b["reward"]["acc"]))
    assert differ > 0
    page.click("nav button[data-tab=diff]")
    total = page.wait_for_selector("#diff-total")
    assert total.get_attribute("data-total") == str(differ)
    assert len(page.query_selector_all("#diff-table tbody tr")) == differ
    if SHOTS:
        page.screenshot(path=str(Path(SHOTS) / "view-diff.png"), full_page=False)
    page.click("#diff-table tbody tr")
    page.wait_for_selector("#group .card")
    assert len(page.query_selector_all("#group .card")) == 2
    assert page.errors == []


def test_a_file_to_score_is_shown_at_once_then_with_its_scored_figures(
    browser: Any, served: dict[str, Any], tmp_path: Path
) -> None:
    command = [PYTHON, "-m", "judger", "view", str(MATH), "--no-browser", "--cache-dir", str(tmp_path)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        assert proc.stdout is not None
        match = re.search(r"http://127\.0\.0\.1:\d+/", proc.stdout.readline())
        assert match, proc.stderr.read() if proc.stderr else ""
        for _ in range(100):
            try:
                page.goto(match.group(0))
                break
            except sync_api.Error:
                time.sleep(0.2)
        # while the file is scored: the first rows, and a banner that says so
        banner = page.wait_for_selector("#indexing:not([hidden])", timeout=30_000)
        assert "indexing" in banner.inner_text()
        page.wait_for_selector("#sample-table tbody tr", state="attached", timeout=30_000)
        if SHOTS:
            page.screenshot(path=str(Path(SHOTS) / "view-indexing.png"), full_page=False)
        page.wait_for_selector("body[data-ready='1']", timeout=300_000)
        assert page.is_hidden("#indexing")
        _assert_summary_shown(page, served["summary"])
        assert errors == []
    finally:
        page.close()
        proc.terminate()
        proc.wait(timeout=10)


def test_html_report_renders_offline_with_latex_and_plots(browser: Any, tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    summary = _score(tmp_path / "scored.jsonl", "--html", str(report))
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(report.as_uri())
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    assert errors == []
    assert [u for u in requests if not u.startswith(("file:", "data:"))] == []
    for cell in page.query_selector_all("#summary-table td[data-field]"):
        row = summary["data_sources"][cell.get_attribute("data-source")]
        field = cell.get_attribute("data-field")
        value = row["at_n"][field[5:]] if field.startswith("at_n.") else row[field]
        assert json.loads(cell.get_attribute("data-value")) == value
    assert len(page.query_selector_all(".plots .uplot")) == 3
    assert page.query_selector_all("#examples .card")
    assert page.query_selector_all("#examples .katex")
    page.close()
