"""`judger view` shows the file it was given, as it is: never another file's rows under this one's
verdicts, never an index of what the file held before, and a file written or replaced while it is
viewed is said (409, and ``changed`` in ``/api/meta``), never served as new text beside old verdicts.
Unreadable rows are kept to the first ones and counted, whatever their number."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient

from judger.cli.bad_rows import KEPT, BadRows
from judger.cli.tally import Tally
from judger.cli.viewer.app import create_app
from judger.cli.viewer.cache import IndexCache
from judger.cli.viewer.identity import FileChanged, Identity, Snapshot
from judger.cli.viewer.index import RolloutIndex, build_kept
from judger.trainer.io import RowError

pytestmark = pytest.mark.py310

ROOT = Path(__file__).resolve().parents[2]
LOCAL = "http://127.0.0.1:8000"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _rows(tag: str, right: bool, n: int = 4) -> str:
    """``n`` scored GSM8K rows whose responses say ``tag``; right or wrong, in lines of one length."""
    value = 1.0 if right else 0.0
    lines = []
    for i in range(n):
        row = {
            "data_source": "openai/gsm8k",
            "prompt": [{"role": "user", "content": f"question {i}"}],
            "response": f"{tag} answer {i}",
            "reward_model": {"ground_truth": "7"},
            "reward": {"score": value, "acc": value, "pred": "7"},
        }
        lines.append(json.dumps(row))
    return "\n".join(lines) + "\n"


@contextmanager
def _viewing(path: str, cache: Path, cwd: Path) -> Iterator[str]:
    """`judger view PATH` started in ``cwd``, once its index is complete: its URL."""
    command = [sys.executable, "-m", "judger", "view", path, "--no-browser", "--cache-dir", str(cache)]
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=cwd
    )
    try:
        assert proc.stdout is not None
        match = re.search(r"http://127\.0\.0\.1:\d+/", proc.stdout.readline())
        assert match, proc.stderr.read() if proc.stderr else ""
        url = match.group(0)
        for _ in range(600):
            try:
                if httpx.get(url + "api/meta", timeout=5).json()["complete"]:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_file_named_from_another_folder_is_the_file_named(tmp_path: Path) -> None:
    """The index kept for A/x.jsonl (opened in A as x.jsonl) held the path as typed: opened from B
    as ../A/x.jsonl, it read B/x.jsonl's rows under A's verdicts."""
    a, b, cache = tmp_path / "A", tmp_path / "B", tmp_path / "cache"
    a.mkdir()
    b.mkdir()
    (a / "x.jsonl").write_text(_rows("A", right=True))
    (b / "x.jsonl").write_text(_rows("B", right=False))
    with _viewing("x.jsonl", cache, a) as url:
        assert httpx.get(url + "api/sample/2").json()["response"] == "A answer 2"
    with _viewing("../A/x.jsonl", cache, b) as url:
        meta = httpx.get(url + "api/meta").json()["files"][0]
        assert meta["cached"]
        sample = httpx.get(url + "api/sample/2").json()
        assert (sample["response"], sample["verdict"]) == ("A answer 2", "right")
        group = httpx.get(url + "api/group/0").json()
        assert [s["response"] for s in group["samples"]] == ["A answer 0"]


def test_a_file_rewritten_with_the_same_size_and_mtime_is_indexed_again(tmp_path: Path) -> None:
    """Keyed by size and mtime, a rewrite that kept both (the writer set the mtime back, as cp -p,
    rsync and touch -r do) showed the old figures as complete; ctime moves on any write."""
    path, cache = tmp_path / "x.jsonl", tmp_path / "cache"
    path.write_text(_rows("same", right=True))
    with _viewing(str(path), cache, tmp_path) as url:
        assert (
            httpx.get(url + "api/summary").json()["summary"]["data_sources"]["openai/gsm8k"]["accuracy"] == 1
        )
    before = path.stat()
    path.write_text(_rows("same", right=False))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    with _viewing(str(path), cache, tmp_path) as url:
        assert not httpx.get(url + "api/meta").json()["files"][0]["cached"]
        summary = httpx.get(url + "api/summary").json()["summary"]
        assert summary["data_sources"]["openai/gsm8k"]["accuracy"] == 0


def test_a_file_replaced_while_viewed_is_said_not_paired_with_old_verdicts(tmp_path: Path) -> None:
    """The file replaced under a running viewer: a sample opened paired the new file's text with
    the old verdict, or (past the new file's end) answered 500."""
    path = tmp_path / "x.jsonl"
    path.write_text(_rows("old", right=True, n=6))
    with _viewing(str(path), tmp_path / "cache", tmp_path) as url:
        assert httpx.get(url + "api/sample/1").json()["response"] == "old answer 1"
        unchanged = httpx.get(url + "api/meta").json()["files"][0]
        new = tmp_path / "new.jsonl"
        new.write_text(_rows("new", right=False, n=2))
        os.replace(new, path)
        for sample in (1, 5):
            answer = httpx.get(url + f"api/sample/{sample}")
            assert answer.status_code == 409, answer.text
            assert "changed on disk" in answer.json()["detail"]
        assert httpx.get(url + "api/group/0").status_code == 409
        assert unchanged["changed"] is False
        assert httpx.get(url + "api/meta").json()["files"][0]["changed"] is True


def test_a_row_rewritten_within_the_clocks_tick_is_caught_by_what_it_holds(tmp_path: Path) -> None:
    """A write within the file clock's tick leaves size, mtime and ctime as they were: the content
    itself is checked (the fingerprint on reuse from the cache, the row on reading it back)."""
    path = tmp_path / "x.jsonl"
    path.write_text(_rows("old", right=True))
    index = RolloutIndex(path)
    stem = tmp_path / "kept"
    index.save(stem)
    cache = IndexCache(tmp_path)
    assert cache.load(stem) is not None
    path.write_text(_rows("new", right=True))
    # as if the clock had not moved: the identity now, the fingerprint of the old content
    same_tick = Snapshot(Identity.of(path), index.snapshot.fingerprint)
    facts = json.loads(stem.with_suffix(".json").read_text())
    stem.with_suffix(".json").write_text(json.dumps({**facts, **same_tick.as_facts()}))
    assert cache.load(stem) is None
    index.snapshot = same_tick
    with pytest.raises(FileChanged):
        index.detail(1)
    answer = TestClient(create_app(index), base_url=LOCAL).get("/api/sample/1")
    assert answer.status_code == 409 and "changed on disk" in answer.json()["detail"]


def test_a_file_changed_while_it_is_indexed_is_not_kept_one_appended_to_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from judger.cli.viewer import index as view_index

    path = tmp_path / "x.jsonl"
    real = view_index.build
    write: Any = None

    def build_then_write(*args: Any, **kwargs: Any) -> Any:
        built = real(*args, **kwargs)
        write()
        return built

    def rewrite() -> None:
        path.write_text(_rows("new", right=False, n=5))

    def append() -> None:
        with path.open("a") as fh:
            fh.write(_rows("more", right=False, n=2))

    monkeypatch.setattr(view_index, "build", build_then_write)
    path.write_text(_rows("old", right=True))
    write = rewrite
    with pytest.raises(FileChanged, match="changed while it was indexed"):
        build_kept(path, tmp_path / "kept")
    assert not (tmp_path / "kept.json").exists()
    # a file still being written (`judger eval -o`): rows appended while it is read change none
    path.write_text(_rows("old", right=True))
    write = append
    build_kept(path, tmp_path / "kept")
    kept = RolloutIndex.load(tmp_path / "kept")
    assert kept.file_state() == "grown" and kept.detail(3)["response"] == "old answer 3"


def test_a_file_appended_to_while_viewed_is_still_read_and_said_to_have_grown(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(_rows("old", right=True))
    with _viewing(str(path), tmp_path / "cache", tmp_path) as url:
        with path.open("a") as fh:
            fh.write(_rows("more", right=False, n=2))
        assert httpx.get(url + "api/sample/3").json()["response"] == "old answer 3"
        meta = httpx.get(url + "api/meta").json()["files"][0]
        assert (meta["grown"], meta["changed"]) == (True, False)


def _bad_file(path: Path, bad: int) -> Path:
    path.write_text(_rows("good", right=True, n=3) + "{not json\n" * bad)
    return path


def test_unreadable_rows_are_kept_to_the_first_and_counted(tmp_path: Path) -> None:
    """Every unreadable row's error was kept (1M bad lines: 870 MB in the viewer, 72 MB a summary
    request); now the first KEPT are, with the count, in the index, its kept facts and the page."""
    many, few = 20 * KEPT, 2 * KEPT
    big = RolloutIndex(_bad_file(tmp_path / "big.jsonl", many))
    small = RolloutIndex(_bad_file(tmp_path / "small.jsonl", few))
    assert big.summary["bad_rows"] == many and small.summary["bad_rows"] == few
    assert len(big.errors) == len(big.summary["bad_row_errors"]) == KEPT
    assert big.errors[0].row == 4 and big.errors[-1].row == 3 + KEPT  # the first ones, in order
    sizes = []
    for index in (big, small):
        body = TestClient(create_app(index), base_url=LOCAL).get("/api/summary")
        assert body.json()["summary"]["bad_rows"] == index.summary["bad_rows"]
        sizes.append(len(body.content))
    assert abs(sizes[0] - sizes[1]) < 16  # the same, but for the counts' digits
    # what the worker keeps on disk holds the first ones too
    build_kept(tmp_path / "big.jsonl", tmp_path / "kept")
    facts = json.loads((tmp_path / "kept.json").read_text())
    assert len(facts["errors"]) == KEPT and facts["summary"]["bad_rows"] == many


def test_a_run_keeps_the_first_bad_rows_and_counts_them_all() -> None:
    rows = BadRows()
    for number in range(1, 100_001):
        rows.append(RowError(number, "not JSON"))
    assert len(rows) == rows.count == 100_000
    assert [e.row for e in rows] == list(range(1, KEPT + 1))
    assert len(rows._first) == KEPT  # the structure that holds them: bounded
    tally = Tally()
    tally.errors.extend(RowError(n, "bad") for n in range(5 * KEPT))
    assert tally.summary(1.0)["bad_rows"] == 5 * KEPT and len(list(tally.errors)) == KEPT


def test_judger_view_of_many_bad_rows_answers_a_bounded_summary(tmp_path: Path) -> None:
    path = _bad_file(tmp_path / "bad.jsonl", 50 * KEPT)
    with _viewing(str(path), tmp_path / "cache", tmp_path) as url:
        summary = httpx.get(url + "api/summary").json()["summary"]
    assert summary["bad_rows"] == 50 * KEPT
    assert len(summary["bad_row_errors"]) == KEPT
