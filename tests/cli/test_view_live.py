"""`judger view` on a file still being indexed: the page answers from the first rows, then converges
to the whole file's figures; the index kept in the cache is reused, and rebuilt when the file or the
scoring changes; a failed indexing is said, never left partial without a word."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("math_verify")

from fastapi.testclient import TestClient

from judger.cli.main import build_parser, main
from judger.cli.viewer.app import create_app
from judger.cli.viewer.cache import IndexCache, scoring_key
from judger.cli.viewer.index import RolloutIndex, build_kept, diff, prompt_hash
from judger.cli.viewer.live import IndexJob, LiveIndex, in_process, index_file, index_in_background
from judger.cli.viewer.worker import WorkerError, in_worker, make_scorer
from judger.trainer.io import example_data

MATH = example_data("math_rollouts_dev.jsonl")
LOCAL = "http://127.0.0.1:8000"
VOLATILE = ("elapsed_s", "samples_per_s", "input")
ROOT = Path(__file__).resolve().parents[2]


def _stable(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in summary.items() if k not in VOLATILE}


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """The bundled MATH rollouts scored by `judger score` (its JSON summary, and the scored file)."""
    out = tmp_path_factory.mktemp("live") / "scored.jsonl"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "judger",
            "score",
            str(MATH),
            "--format",
            "json",
            "--no-progress",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=_env(),
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), out


def _scorer() -> Any:
    return make_scorer(build_parser().parse_args(["view", str(MATH)]))


def test_the_page_answers_from_the_first_rows_while_the_file_is_scored_then_converges(
    scored: tuple[dict[str, Any], Path],
) -> None:
    release = threading.Event()
    real = _scorer()

    def held(states: list[Any]) -> None:
        assert release.wait(120)
        real(states)

    live = LiveIndex(MATH)
    job = IndexJob(MATH, in_process(MATH, held, False), preview_rows=100)
    thread = index_in_background(live, job)
    client = TestClient(create_app(live), base_url=LOCAL)
    try:
        # the first rows are served before the scoring of the file is done
        first = client.get("/api/samples?limit=500").json()
        assert (first["total"], first["complete"]) == (100, False)
        # not scored yet: skipped, never wrong (a 0 it did not earn)
        assert first["counts"]["skipped"] == 100 and first["counts"]["wrong"] == 0
        for _ in range(600):
            meta = client.get("/api/meta").json()
            if meta["files"][0]["phase"] == "scoring":
                break
            time.sleep(0.1)
        assert meta["complete"] is False
        assert meta["files"][0]["phase"] == "scoring" and meta["files"][0]["count"] == 400
        assert client.get("/api/summary").json()["summary"]["samples"] == 100
        assert client.get("/api/group/3").json()["n"] == 8
    finally:
        release.set()
    thread.join(120)
    assert live.complete and live.error is None
    body = client.get("/api/summary").json()
    assert body["complete"] is True
    assert _stable(body["summary"]) == _stable(scored[0])
    assert client.get("/api/samples").json()["total"] == 400
    assert client.get("/api/meta").json()["files"][0]["scored_on_load"] == 400


def test_a_preview_reads_only_the_first_rows_and_reads_them_back(scored: tuple[dict[str, Any], Path]) -> None:
    rows = [json.loads(line) for line in scored[1].read_text().splitlines()]
    preview = RolloutIndex(scored[1], max_rows=30)
    assert (preview.n, preview.partial) == (30, True)
    assert preview.detail(29)["response"] == rows[29]["response"]
    whole = RolloutIndex(scored[1], max_rows=400)
    assert (whole.n, whole.partial) == (400, False)


def test_a_kept_index_is_reused_and_rebuilt_when_the_file_or_the_scoring_changes(
    tmp_path: Path, scored: tuple[dict[str, Any], Path]
) -> None:
    raw = tmp_path / "rollouts.jsonl"
    raw.write_bytes(MATH.read_bytes())
    cache = IndexCache(tmp_path / "cache")
    cache.directory.mkdir()
    real = _scorer()
    calls: list[int] = []

    def counted(states: list[Any]) -> None:
        calls.append(len(states))
        real(states)

    def view(scoring: str = "default") -> LiveIndex:
        live = LiveIndex(raw)
        index_file(live, IndexJob(raw, in_process(raw, counted, False), False, cache, scoring))
        assert live.complete, live.error
        return live

    first = view()
    assert calls == [400] and not first.cached
    again = view()
    assert calls == [400] and again.cached
    assert _stable(again.current().summary) == _stable(scored[0])
    assert again.current().detail(7)["response"] == first.current().detail(7)["response"]
    view("another config")
    assert calls == [400, 400]
    # the file changed: its index is built again, never shown stale
    raw.write_text("".join(MATH.read_text().splitlines(keepends=True)[:16]))
    changed = view()
    assert calls == [400, 400, 16] and not changed.cached
    assert changed.current().n == 16


def test_the_cache_keeps_only_the_most_recent_indexes(
    tmp_path: Path, scored: tuple[dict[str, Any], Path]
) -> None:
    cache = IndexCache(tmp_path)
    index = RolloutIndex(scored[1], max_rows=10)
    for k in range(5):
        index.save(tmp_path / f"k{k}")
        time.sleep(0.01)
    cache.prune(keep=2)
    assert sorted(p.name for p in tmp_path.glob("*.json")) == ["k3.json", "k4.json"]
    assert sorted(p.name for p in tmp_path.glob("*.arrow")) == ["k3.arrow", "k4.arrow"]


def test_a_config_file_is_keyed_by_its_contents(tmp_path: Path) -> None:
    config = tmp_path / "judge.yaml"
    config.write_text("a: 1\n")
    before = scoring_key(str(config), None, None, True)
    config.write_text("a: 2\n")
    assert scoring_key(str(config), None, None, True) != before


def test_an_indexing_that_fails_is_said_not_left_partial(
    tmp_path: Path, scored: tuple[dict[str, Any], Path]
) -> None:
    def broken(states: list[Any]) -> None:
        raise RuntimeError("the judge is down")

    live = LiveIndex(MATH)
    index_file(live, IndexJob(MATH, in_process(MATH, broken, False), preview_rows=50))
    assert not live.complete
    assert live.error is not None and "RuntimeError: the judge is down" in live.error
    meta = TestClient(create_app(live), base_url=LOCAL).get("/api/meta").json()
    assert meta["complete"] is False and "the judge is down" in meta["files"][0]["error"]
    gone = LiveIndex(tmp_path / "gone.jsonl")
    index_file(gone, IndexJob(tmp_path / "gone.jsonl", in_process(MATH, None, False)))
    assert gone.error is not None and "no such file" in gone.error
    assert TestClient(create_app(gone), base_url=LOCAL).get("/api/samples").status_code == 503


def test_a_worker_that_cannot_score_says_why(tmp_path: Path) -> None:
    scoring = {"config": None, "preset": "no-such-preset", "compat": None, "workers": None, "batch_size": 256}
    build = in_worker(MATH, scoring, True)
    with pytest.raises(WorkerError, match="no-such-preset"):
        build(tmp_path / "index", lambda phase, count: None)
    assert not (tmp_path / "index.json").exists()


def test_the_prompt_hash_is_the_same_in_every_process() -> None:
    code = "from judger.cli.viewer.index import prompt_hash; print(prompt_hash('gsm8k', 'What is 1+1?'))"
    other = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=60
    )
    assert int(other.stdout) == prompt_hash("gsm8k", "What is 1+1?")


def test_diff_pairs_samples_by_prompt_and_place(tmp_path: Path) -> None:
    base = {"data_source": "openai/gsm8k", "reward_model": {"ground_truth": "2"}}

    def row(prompt: str, right: bool) -> dict[str, Any]:
        score = 1.0 if right else 0.0
        return {
            **base,
            "prompt": prompt,
            "response": "r",
            "reward": {"score": score, "acc": right},
            "score": score,
        }

    a = [row("p", True), row("p", True), row("q", False), row("r", True)]
    # another order, a flipped second sample of "p" and of "q", a prompt only in b
    b = [row("q", True), row("p", True), row("s", False), row("p", False)]
    for name, rows in (("a", a), ("b", b)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    left, right = diff(RolloutIndex(tmp_path / "a.jsonl"), RolloutIndex(tmp_path / "b.jsonl"))
    assert left.tolist() == [1, 2] and right.tolist() == [3, 0]
    assert left.dtype == right.dtype == np.int64


def test_judger_view_of_a_file_to_score_serves_at_once_then_the_scored_figures(
    tmp_path: Path, scored: tuple[dict[str, Any], Path]
) -> None:
    command = [
        sys.executable,
        "-m",
        "judger",
        "view",
        str(MATH),
        "--no-browser",
        "--cache-dir",
        str(tmp_path),
    ]

    def serve() -> list[dict[str, Any]]:
        proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env()
        )
        try:
            assert proc.stdout is not None
            match = re.search(r"http://127\.0\.0\.1:\d+/", proc.stdout.readline())
            assert match, proc.stderr.read() if proc.stderr else ""
            seen = []
            for _ in range(1200):
                try:
                    seen.append(httpx.get(match.group(0) + "api/meta", timeout=5).json())
                except httpx.TransportError:
                    pass
                if seen and seen[-1]["complete"]:
                    break
                time.sleep(0.1)
            summary = httpx.get(match.group(0) + "api/summary", timeout=5).json()["summary"]
            assert _stable(summary) == _stable(scored[0])
            return seen
        finally:
            proc.terminate()
            proc.wait(timeout=10)

    first = serve()
    assert first[-1]["complete"] and not first[-1]["files"][0]["cached"]
    # answered before the whole file was scored (by a worker process)
    assert any(m["files"][0]["phase"] == "scoring" for m in first)
    again = serve()
    assert again[-1]["files"][0]["cached"] and again[-1]["files"][0]["scored_on_load"] == 400


def test_a_file_that_cannot_be_read_is_refused_before_serving(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["view", str(tmp_path / "nope.jsonl"), "--no-browser", "--cache-dir", str(tmp_path)]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["view", str(MATH), "--preset", "no-such-preset", "--no-browser"]) == 2
    assert "no-such-preset" in capsys.readouterr().err


def test_a_file_is_indexed_chunk_by_chunk_with_one_judger_and_the_same_figures(
    tmp_path: Path, scored: tuple[dict[str, Any], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from judger.cli import judging as score
    from judger.cli.viewer import columns as view_build

    # 60 rows a chunk: the prompt of rows 57-64 is split between two chunks
    monkeypatch.setattr(view_build, "CHUNK_ROWS", 60)
    built: list[int] = []
    real_build = score.build
    monkeypatch.setattr(score, "build", lambda args: built.append(1) or real_build(args))
    scorer = _scorer()
    chunks: list[int] = []
    real_call = type(scorer).__call__
    monkeypatch.setattr(
        type(scorer), "__call__", lambda self, states: chunks.append(len(states)) or real_call(self, states)
    )
    build_kept(MATH, tmp_path / "index", scorer=scorer)
    assert chunks == [60] * 6 + [40]  # never more than a chunk's states at a time
    assert built == [1]  # one judger (and its pools) for the whole file
    index = RolloutIndex.load(tmp_path / "index")
    assert _stable(index.summary) == _stable(scored[0])
    rows = [json.loads(line) for line in scored[1].read_text().splitlines()]
    members = index.group_members(58)
    assert [int(index.row[i]) for i in members] == list(range(57, 65))
    assert sorted(int(index.place[i]) for i in members) == list(range(8))
    assert [index.item(int(i))["score"] for i in members] == [rows[r - 1]["score"] for r in range(57, 65)]


def test_the_progress_counts_rows_read_and_samples_scored_over_every_chunk() -> None:
    live = LiveIndex(MATH)
    for rows in (60, 120):
        live.report("reading", rows)
        live.report("scoring", 60)
        live.report("scored", 50)
        live.report("scored", 10)
    status = live.status()
    assert (status["phase"], status["count"], status["done"]) == ("scoring", 120, 120)
    live.report("summarising", 120)
    assert live.status()["phase"] == "summarising" and live.status()["done"] == 120


def test_a_kept_index_that_cannot_be_read_is_built_again(
    tmp_path: Path, scored: tuple[dict[str, Any], Path]
) -> None:
    import pyarrow as pa

    cache = IndexCache(tmp_path)
    stem = cache.stem(scored[1], "default")
    RolloutIndex(scored[1], max_rows=10).save(stem)
    assert cache.load(stem) is not None
    # columns of another version of judger view
    with pa.OSFile(str(stem.with_suffix(".arrow")), "wb") as sink:
        table = pa.table({"row": [1, 2]})
        with pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
    assert cache.load(stem) is None
    stem.with_suffix(".arrow").write_bytes(b"not arrow")
    assert cache.load(stem) is None
