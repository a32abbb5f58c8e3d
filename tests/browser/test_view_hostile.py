"""What a policy writes reaches a person through `judger view` and the `--html` report: one hostile
rollout may cost its own cell, never the page, the cells around it or the reader's trust in them.

In Chromium (see test_view_page.py for the tier): a scored file of hostile rows next to ordinary
ones, served by `judger view`, and the same rows scored by `judger score --html`. Each attack is a
row: KaTeX's RangeError (a recursive macro, 5,000 nested braces), math that paints over the cells
around it (\\llap, \\smash, \\raisebox, \\rule, \\color), a bidi override that reorders digits;
and real text: GSM8K's dollar amounts are not math, `judger eval`'s truncated rows can be found.
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
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

sync_api = pytest.importorskip("playwright.sync_api")

ROOT = Path(__file__).resolve().parents[2]
GSM8K = ROOT / "src" / "judger" / "data" / "gsm8k_test.jsonl"
PYTHON = os.environ.get("JUDGER_PYTHON") or sys.executable
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")

# KaTeX throws a RangeError (the stack), which its throwOnError: false does not catch
GDEF = r"\gdef\a#1{\a{#1#1}}\a x"
BRACES = "{" * 5000 + "x" + "}" * 5000
# "right 1" painted 60em to the left of the response: over the verdict and score cells
OVER_LEFT = r"\llap{\color{green}{\textsf{right}\ 1}\kern60em}"
# a raised answer: over the row above, over a card's verdict label
RAISED = r"\smash{\raisebox{4em}{\color{green}{\textsf{right}}}}"
# a white sheet over everything around it
SHEET = r"\smash{\color{white}{\rule[-30em]{80em}{60em}}}"
RLO, PDF = "\u202e", "\u202c"
HOSTILE_ROWS = 5  # the rows above, before the ordinary ones
BAD_LINES = 150


def _gsm8k_with_dollars(n: int) -> list[dict[str, Any]]:
    """The first ``n`` GSM8K test questions holding two "$" or more (a fifth of them do)."""
    rows = [json.loads(line) for line in GSM8K.read_text().splitlines() if line.strip()]
    return [r for r in rows if r["question"].count("$") >= 2][:n]


def _row(prompt: str, response: str, pred: str, right: bool, **extra: Any) -> dict[str, Any]:
    score = 1.0 if right else 0.0
    return {
        "data_source": "openai/gsm8k",
        "prompt": [{"role": "user", "content": prompt}],
        "response": response,
        "reward_model": {"ground_truth": "5"},
        "reward": {"score": score, "acc": right, "pred": pred},
        "score": score,
        **extra,
    }


def _hostile_rows() -> list[dict[str, Any]]:
    rows = [
        _row("Solve $x+1=2$.", f"Let ${GDEF}$ hold. Then $x^2$ is", GDEF, False),
        _row("Solve $x+2=3$.", f"${BRACES}$ and $y^2$", BRACES, False),
        _row("Solve $x+3=4$.", f"The answer is ${OVER_LEFT}$ and ${SHEET}$", RAISED, False),
        _row("Solve $x+4=5$.", f"The answer is {RLO}024{PDF}.", f"{RLO}024", False),
        # real math, in every delimiter, still rendered
        _row(r"What is $2x+3$ at $x=1$?", r"So $$\frac{10}{2}$$ and \(a^2\), \[b_1\]: $x$ is 5", "5", True),
    ]
    assert len(rows) == HOSTILE_ROWS
    for item in _gsm8k_with_dollars(10):
        truth = item["answer"].rsplit("####", 1)[1].strip()
        rows.append(_row(item["question"], item["answer"], truth, True))
    # as `judger eval -o` writes them: how the generation ended, on the row
    rows[-1].update(finish_reason="length", truncated=True)
    rows[-2].update(finish_reason="length", truncated=True)
    rows[-3].update(finish_reason="stop", truncated=False)
    return rows


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}


@contextmanager
def _serving(path: Path, cache: Path) -> Iterator[str]:
    """`judger view PATH`, running: its URL."""
    command = [PYTHON, "-m", "judger", "view", str(path), "--no-browser", "--cache-dir", str(cache)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        assert proc.stdout is not None
        match = re.search(r"http://127\.0\.0\.1:\d+/", proc.stdout.readline())
        assert match, proc.stderr.read() if proc.stderr else ""
        yield match.group(0)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """`judger view` over the hostile rows (and unreadable lines), running."""
    tmp = tmp_path_factory.mktemp("hostile")
    rows = _hostile_rows()
    path = tmp / "hostile.jsonl"
    lines = [json.dumps(r, ensure_ascii=False) for r in rows] + ["{not json"] * BAD_LINES
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with _serving(path, tmp / "cache") as url:
        yield {"url": url, "rows": rows}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM:
        pytest.fail("no Chromium: apt-get install chromium, or set CHROMIUM=/path/to/chromium")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


def _open(browser: Any, url: str) -> Any:
    """A page at ``url`` once it is rendered (or has failed: its errors are in ``page.errors``)."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.errors = errors
    for _ in range(100):  # the server may still be starting
        try:
            page.goto(url)
            break
        except sync_api.Error:
            time.sleep(0.2)
    page.wait_for_selector("body[data-ready='1'], body > pre.reason", state="attached", timeout=60_000)
    return page


@pytest.fixture
def samples(browser: Any, hostile: dict[str, Any]) -> Iterator[Any]:
    """The Samples tab of the hostile file."""
    page = _open(browser, hostile["url"])
    page.click("nav button[data-tab=samples]")
    yield page
    page.close()


def _cell(page: Any, row: int, column: str) -> Any:
    """The cell of the Samples table in row ``row`` (from 0) under the heading ``column``."""
    headings = [th.inner_text() for th in page.query_selector_all("#sample-table thead th")]
    return page.query_selector(
        f"#sample-table tbody tr:nth-child({row + 1}) td:nth-child({headings.index(column) + 1})"
    )


PRED, PROMPT, RESPONSE = "pred", "prompt", "response (end)"

# every cell (or card part) sampled on a grid: what the point shows must be the cell's own content
_STRAYS = """(selector) => {
  const strays = [];
  for (const box of document.querySelectorAll(selector)) {
    box.scrollIntoView({ block: "center", inline: "nearest" });
    const r = box.getBoundingClientRect();
    // inside the box by 3 px at least: a border is shared with the neighbour
    const at = (start, size, f) => start + Math.min(Math.max(size * f, 3), size - 3);
    for (const fx of [0.05, 0.3, 0.5, 0.7, 0.95]) for (const fy of [0.1, 0.5, 0.9]) {
      const hit = document.elementFromPoint(at(r.left, r.width, fx), at(r.top, r.height, fy));
      if (hit && !box.contains(hit)) {
        strays.push(`${box.textContent.slice(0, 30)}: ${hit.className} ${hit.textContent.slice(0, 30)}`);
      }
    }
  }
  return strays;
}"""

# the left edges of the characters of the first "024" in ``box``'s text, in reading order
_DIGIT_XS = """(box) => {
  const walk = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
  for (let node = walk.nextNode(); node; node = walk.nextNode()) {
    const at = node.data.indexOf("024");
    if (at < 0) continue;
    return [0, 1, 2].map((k) => {
      const range = document.createRange();
      range.setStart(node, at + k);
      range.setEnd(node, at + k + 1);
      return range.getBoundingClientRect().left;
    });
  }
  return null;
}"""


def test_a_formula_katex_throws_on_costs_its_own_cell_not_the_table(
    samples: Any, hostile: dict[str, Any]
) -> None:
    """The recursive \\gdef and the 5,000 braces threw a RangeError out of the page's rendering: the
    Samples table showed 0 rows. Now each such formula stays its text, the rest is rendered."""
    samples.wait_for_selector("#sample-table tbody tr", timeout=30_000)
    assert samples.errors == []
    rows = samples.query_selector_all("#sample-table tbody tr")
    assert len(rows) == len(hostile["rows"])
    gdef = _cell(samples, 0, RESPONSE)
    assert GDEF in gdef.inner_text()  # the formula as the model wrote it
    assert len(gdef.query_selector_all(".katex")) == 1  # ... and its neighbour $x^2$ rendered
    assert _cell(samples, 0, PRED).inner_text() == GDEF
    assert _cell(samples, 1, PRED).inner_text() == _cut(BRACES)  # the table shows its first 300
    assert len(_cell(samples, 1, RESPONSE).query_selector_all(".katex")) == 1  # $y^2$
    # the page goes on working: a group opens, with the failing formulas as text
    samples.click("#sample-table tbody tr[data-id='0']")
    card = samples.wait_for_selector("#group-cards .card")
    assert GDEF in card.inner_text()
    samples.click("nav button[data-tab=samples]")
    samples.click("#sample-table tbody tr[data-id='1']")  # the whole 5,000 braces, in answer and text
    card = samples.wait_for_selector("#group-cards .card[data-id='1']")
    assert card.query_selector(".pred").inner_text() == BRACES
    assert BRACES in card.query_selector(".response").inner_text()
    assert len(card.query_selector_all(".response .katex")) == 1  # $y^2$
    assert samples.errors == []


def test_math_paints_only_inside_its_own_cell(samples: Any) -> None:
    """\\llap, \\smash, \\raisebox and \\rule drew "right 1" over the verdict and score cells and a white
    sheet over the rows around them; now every point of every cell shows that cell's content."""
    samples.wait_for_selector("#sample-table tbody tr", timeout=30_000)
    assert samples.evaluate(_STRAYS, "#sample-table td") == []
    # the colour the policy asked for is not used: nothing of it looks like the page's own labels
    colours = samples.evaluate(
        "() => [...document.querySelectorAll('#sample-table .katex *')].map((e) => getComputedStyle(e).color)"
    )
    assert colours and set(colours) <= {"rgb(34, 34, 34)"}
    samples.click("#sample-table tbody tr[data-id='2']")
    samples.wait_for_selector("#group-cards .card")
    # the raised extracted answer stays in its line of the card: the card's "wrong" is seen
    assert samples.evaluate(_STRAYS, "#group-cards .card > *") == []


def test_bidi_controls_are_shown_not_obeyed(samples: Any) -> None:
    """U+202E made the answer 024 read 420; now the control is shown as U+202E and 024 reads 024."""
    samples.wait_for_selector("#sample-table tbody tr", timeout=30_000)
    for column in (RESPONSE, PRED):
        cell = _cell(samples, 3, column)
        xs = samples.evaluate(_DIGIT_XS, cell)
        assert xs is not None and xs[0] < xs[1] < xs[2], (column, xs)
        assert "U+202E" in cell.inner_text() and RLO not in cell.inner_text()
    assert "U+202C" in _cell(samples, 3, RESPONSE).inner_text()


def _cut(text: str, limit: int = 300, tail: bool = False) -> str:
    if len(text) <= limit:
        return text
    return "…" + text[-limit:] if tail else text[:limit] + "…"


def test_dollar_amounts_are_text_and_math_is_math(samples: Any, hostile: dict[str, Any]) -> None:
    """KaTeX's "$" delimiter made GSM8K's "$80,000 ... $50,000" italic math; now amounts are text
    (in the table, and for every GSM8K question and answer with two "$" or more), and $x$, $2x+3$,
    $$...$$, \\(...\\) and \\[...\\] are still rendered."""
    samples.wait_for_selector("#sample-table tbody tr", timeout=30_000)
    rows = hostile["rows"]
    for i in range(HOSTILE_ROWS, len(rows)):
        prompt, response = _cell(samples, i, PROMPT), _cell(samples, i, RESPONSE)
        assert prompt.query_selector_all(".katex") == response.query_selector_all(".katex") == []
        assert prompt.text_content() == _cut(rows[i]["prompt"][0]["content"])
        assert response.text_content() == _cut(rows[i]["response"], tail=True)
    math = HOSTILE_ROWS - 1
    assert len(_cell(samples, math, PROMPT).query_selector_all(".katex")) == 2
    assert len(_cell(samples, math, RESPONSE).query_selector_all(".katex")) == 4
    # the page's own renderer over all of GSM8K's test texts that hold two "$" or more
    every = [json.loads(line) for line in GSM8K.read_text().splitlines() if line.strip()]
    texts = [t for r in every for t in (r["question"], r["answer"]) if t.count("$") >= 2]
    assert len(texts) > 500
    render = "(t) => { const d = text(t); return [d.querySelectorAll('.katex').length, d.textContent]; }"
    shown = samples.evaluate(f"(texts) => texts.map({render})", texts)
    assert [s for s, t in zip(shown, texts) if s != [0, t]] == []


def test_truncated_rows_have_a_column_and_a_filter(samples: Any, hostile: dict[str, Any]) -> None:
    """`judger eval` writes finish_reason and truncated on each row; the viewer showed neither."""
    samples.wait_for_selector("#sample-table tbody tr", timeout=30_000)
    finish = [c.inner_text() for c in samples.query_selector_all("#sample-table td[data-finish]")]
    expected = [r.get("finish_reason") or "-" for r in hostile["rows"]]
    assert [f.split()[0] for f in finish] == expected
    assert [("truncated" in f) for f in finish] == [bool(r.get("truncated")) for r in hostile["rows"]]
    samples.select_option("#filters select[name=truncated]", "true")
    samples.wait_for_selector("#sample-count[data-total='2']")
    assert all("truncated" in c.inner_text() for c in samples.query_selector_all("td[data-finish]"))
    samples.select_option("#filters select[name=truncated]", "false")
    samples.wait_for_selector(f"#sample-count[data-total='{len(hostile['rows']) - 2}']")


def test_unreadable_rows_are_counted_and_the_first_shown(browser: Any, hostile: dict[str, Any]) -> None:
    page = _open(browser, hostile["url"])
    try:
        assert f"{BAD_LINES} unreadable rows" in page.inner_text("#totals")
        assert "the first 100" in page.inner_text("#bad-rows summary")
        assert len(page.query_selector_all("#bad-rows li")) == 100
    finally:
        page.close()


def test_html_report_of_hostile_rows_shows_every_example_card(browser: Any, tmp_path: Path) -> None:
    """The `--html` report rendered no example cards once one formula threw; now each card is
    there, its failing formulas as text, its math clipped, its bidi controls shown."""
    raw = tmp_path / "raw.jsonl"
    golds = [GDEF, BRACES, RAISED, f"{RLO}024"]
    responses = [f"${GDEF}$ #### 1", f"${BRACES}$ #### 2", f"${OVER_LEFT}$ #### 3", f"{RLO}024{PDF} #### 4"]
    rows = [
        {
            "data_source": "openai/gsm8k",
            "prompt": [{"role": "user", "content": f"What is ${gold}$?"}],
            "response": response,
            "reward_model": {"ground_truth": gold},
        }
        for gold, response in zip(golds, responses)
    ]
    raw.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    report = tmp_path / "report.html"
    command = [PYTHON, "-m", "judger", "score", str(raw), "--no-progress", "--html", str(report)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=_env())
    assert report.is_file(), done.stderr
    page = _open(browser, report.as_uri())
    try:
        assert page.errors == []
        cards = page.query_selector_all("#examples .card")
        assert len(cards) == len(rows)
        texts = [c.inner_text() for c in cards]
        assert any(GDEF in t for t in texts) and any(BRACES[:50] in t for t in texts)
        assert page.evaluate(_STRAYS, "#examples .card > *") == []
        bidi = next(c for c in cards if "U+202E" in c.inner_text())
        for part in bidi.query_selector_all(".response, .tex"):
            xs = page.evaluate(_DIGIT_XS, part)
            assert xs is None or xs[0] < xs[1] < xs[2]
        assert RLO not in bidi.inner_text()
    finally:
        page.close()


def test_a_file_replaced_while_viewed_is_said_on_the_page(browser: Any, tmp_path: Path) -> None:
    """Replaced under the viewer, the file's new text was shown beside the old verdicts (or a 500);
    now the page says it changed, and opens no sample of it."""
    path = tmp_path / "x.jsonl"
    rows = _hostile_rows()[HOSTILE_ROWS:]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with _serving(path, tmp_path / "cache") as url:
        page = _open(browser, url)
        try:
            assert page.is_hidden("#changed")
            new = tmp_path / "new.jsonl"
            new.write_text("".join(json.dumps({**r, "response": "replaced"}) + "\n" for r in rows[:2]))
            os.replace(new, path)
            page.click("nav button[data-tab=samples]")
            page.click("#sample-table tbody tr[data-id='1']")
            banner = page.wait_for_selector("#changed:not([hidden])", timeout=10_000)
            assert "changed on disk" in banner.inner_text()
            assert "replaced" not in page.inner_text("#group")
        finally:
            page.close()
