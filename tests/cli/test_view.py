"""`judger view`: the index and the JSON endpoints, checked against `judger score` on the same files."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("math_verify")

from fastapi.testclient import TestClient

from judger.cli.main import build_parser, main
from judger.cli.viewer.app import create_app
from judger.cli.viewer.index import RolloutIndex
from judger.cli.viewer.worker import make_scorer
from judger.trainer.io import example_data

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

MATH = example_data("math_rollouts_dev.jsonl")
# timings and the input path are not figures of the rollouts
LOCAL = "http://127.0.0.1:8000"
VOLATILE = ("elapsed_s", "samples_per_s", "input")


def _stable(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in summary.items() if k not in VOLATILE}


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The bundled MATH rollouts scored by `judger score`, by default and in compat="verl" mode."""
    tmp = tmp_path_factory.mktemp("view")
    results: dict[str, Any] = {}
    for name, extra in (("default", []), ("verl", ["--compat", "verl"])):
        out = tmp / f"{name}.jsonl"
        command = [sys.executable, "-m", "judger", "score", str(MATH), "--format", "json"]
        proc = subprocess.run(
            [*command, "--no-progress", "-o", str(out), *extra],
            capture_output=True,
            text=True,
            timeout=600,
            env=_env(),
        )
        assert proc.returncode == 0, proc.stderr
        results[name] = (json.loads(proc.stdout), out)
    return results


def _env() -> dict[str, str]:
    import os

    src = str(Path(__file__).resolve().parents[2] / "src")
    return {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}


@pytest.fixture(scope="module")
def client(scored: dict[str, Any]) -> TestClient:
    """The viewer over the default-scored file, compared with the compat="verl" one."""
    app = create_app(RolloutIndex(scored["default"][1]), RolloutIndex(scored["verl"][1]))
    return TestClient(app, base_url=LOCAL)


def test_summary_of_a_raw_file_scored_on_the_way_in_equals_judger_score(scored: dict[str, Any]) -> None:
    args = build_parser().parse_args(["view", str(MATH), "--no-browser"])
    index = RolloutIndex(MATH, scorer=make_scorer(args))
    assert index.scored == 400
    assert _stable(index.summary) == _stable(scored["default"][0])


def test_summary_endpoint_of_a_scored_file_equals_judger_score(
    client: TestClient, scored: dict[str, Any]
) -> None:
    body = client.get("/api/summary").json()
    assert _stable(body["summary"]) == _stable(scored["default"][0])
    assert _stable(client.get("/api/summary?file=1").json()["summary"]) == _stable(scored["verl"][0])
    plots = body["plots"]["DigitalLearningGmbH/MATH-lighteval"]
    assert sum(plots["histogram"]["counts"]) == 400
    assert plots["pass_at_k"]["k"] == [2, 4, 8]
    assert len(plots["length_vs_score"]["length"]) == 400


def test_stored_rewards_are_shown_as_they_are_not_scored_again(scored: dict[str, Any]) -> None:
    def refuse(states: list[Any]) -> None:
        raise AssertionError(f"asked to score {len(states)} samples that have rewards")

    index = RolloutIndex(scored["verl"][1], scorer=refuse)
    assert index.scored == 0
    assert _stable(index.summary) == _stable(scored["verl"][0])


def test_filters_give_the_counts_of_the_scored_rows(client: TestClient, scored: dict[str, Any]) -> None:
    rows = _rows(scored["default"][1])
    right = sum(1 for r in rows if r["reward"]["acc"])
    body = client.get("/api/samples").json()
    assert body["total"] == 400
    assert body["counts"] == {"right": right, "wrong": 400 - right, "failed": 0, "timed_out": 0, "skipped": 0}
    wrong = client.get("/api/samples?verdict=wrong&limit=500").json()
    assert wrong["total"] == 400 - right
    assert all(not rows[it["row"] - 1]["reward"]["acc"] for it in wrong["items"])
    # the verdict counts stay those of the other filters (the buttons show what each would give)
    assert wrong["counts"] == body["counts"]

    assert client.get("/api/samples?max_score=0.5").json()["total"] == 400 - right
    assert client.get("/api/samples?min_score=0.5").json()["total"] == right
    assert client.get("/api/samples?source=DigitalLearningGmbH/MATH-lighteval").json()["total"] == 400
    assert client.get("/api/samples?source=nope").status_code == 422
    assert client.get("/api/samples?verdict=maybe").status_code == 422

    word = "triangle"
    expected = sum(
        1 for r in rows if word in r["prompt"][-1]["content"].lower() or word in (r["response"] or "").lower()
    )
    assert 0 < expected < 400
    assert client.get(f"/api/samples?q={word.upper()}").json()["total"] == expected


def test_sorting_and_paging(client: TestClient) -> None:
    first = client.get("/api/samples?sort=score&limit=5").json()["items"]
    assert [it["score"] for it in first] == [0.0] * 5
    longest = client.get("/api/samples?sort=-length&limit=3").json()["items"]
    lengths = [it["length"] for it in longest]
    assert lengths == sorted(lengths, reverse=True)
    everything = client.get("/api/samples?sort=-length&limit=500").json()["items"]
    assert max(it["length"] for it in everything) == lengths[0]
    page2 = client.get("/api/samples?offset=50&limit=50").json()["items"]
    assert [it["id"] for it in page2] == list(range(50, 100))
    assert client.get("/api/samples?sort=nope").status_code == 422


def test_group_view_holds_all_n_samples_of_a_prompt(client: TestClient, scored: dict[str, Any]) -> None:
    rows = _rows(scored["default"][1])
    group = client.get("/api/group/13").json()
    uid = rows[13]["uid"]
    members = [i for i, r in enumerate(rows) if r["uid"] == uid]
    assert group["n"] == len(members) == 8
    assert [s["id"] for s in group["samples"]] == members
    assert group["ground_truth"] == rows[13]["reward_model"]["ground_truth"]
    for sample, i in zip(group["samples"], members):
        assert sample["response"] == rows[i]["response"]  # read back whole, not cut short
        assert sample["pred"] == rows[i]["reward"]["pred"]
        assert sample["score"] == rows[i]["score"]
    assert group["right"] == sum(1 for i in members if rows[i]["reward"]["acc"])
    assert client.get("/api/group/400").status_code == 404


def test_diff_finds_the_verdicts_verl_mode_and_default_mode_disagree_on(
    client: TestClient, scored: dict[str, Any]
) -> None:
    default, verl = _rows(scored["default"][1]), _rows(scored["verl"][1])
    differ = [
        i
        for i, (a, b) in enumerate(zip(default, verl))
        if bool(a["reward"]["acc"]) != bool(b["reward"]["acc"])
    ]
    assert differ, "the bundled rollouts hold verl's false negatives"
    body = client.get("/api/diff?limit=500").json()
    assert body["total"] == len(differ)
    assert [p["a"]["id"] for p in body["items"]] == differ
    assert all(p["a"]["verdict"] != p["b"]["verdict"] for p in body["items"])
    assert sum(body["flips"].values()) == len(differ)
    one = TestClient(create_app(RolloutIndex(scored["default"][1])), base_url=LOCAL)
    assert one.get("/api/diff").status_code == 404


def test_a_reward_holding_an_int_no_float_holds_does_not_stop_the_index(tmp_path: Path) -> None:
    """A scored file is anyone's to write: one row whose reward holds an int past float's range made
    the index raise (np.isfinite's TypeError) and the viewer showed nothing of the file; now that
    value is no score and every other row is served."""
    base = {"data_source": "openai/gsm8k", "prompt": "1+1?", "reward_model": {"ground_truth": "2"}}
    rows = [
        {**base, "response": "2", "reward": {"score": 1.0, "acc": True}, "score": 1.0},
        {**base, "response": "big", "reward": {"score": 10**400, "acc": 10**400}, "score": None},
        {**base, "response": "3", "reward": {"score": 0.0, "acc": False}, "score": 0.0},
    ]
    path = tmp_path / "scored.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    c = TestClient(create_app(RolloutIndex(path, scorer=None)), base_url=LOCAL)
    items = c.get("/api/samples").json()["items"]
    assert [(i["response"], i["score"], i["verdict"]) for i in items] == [
        ("2", 1.0, "right"),
        ("big", None, "wrong"),
        ("3", 0.0, "wrong"),
    ]
    assert c.get("/api/summary").json()["summary"]["data_sources"]["openai/gsm8k"]["mean_score"] == 0.5


def test_failed_and_timed_out_samples_keep_their_reason(tmp_path: Path) -> None:
    base = {"data_source": "openai/gsm8k", "prompt": "1+1?", "reward_model": {"ground_truth": "2"}}
    rows = [
        {**base, "response": "2", "reward": {"score": 1.0, "acc": True, "pred": "2"}, "score": 1.0},
        {
            **base,
            "response": "loops",
            "reward": None,
            "status": "failed",
            "error_msg": "JudgeTimeoutError: took 5 s",
            "judge_failure": {"judger": "gsm8k", "kind": "timeout"},
        },
        {
            **base,
            "response": "boom",
            "reward": None,
            "status": "failed",
            "error_msg": "ValueError: bad",
            "judge_failure": {"judger": "gsm8k", "kind": "error"},
        },
    ]
    path = tmp_path / "scored.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    index = RolloutIndex(path, scorer=None)
    assert (index.summary["failed"], index.summary["timed_out"]) == (1, 1)
    c = TestClient(create_app(index), base_url=LOCAL)
    timed_out = c.get("/api/samples?verdict=timed_out").json()
    assert timed_out["total"] == 1
    assert timed_out["items"][0]["reason"] == "JudgeTimeoutError: took 5 s"
    reasons = c.get("/api/summary").json()["failure_reasons"]["openai/gsm8k"]
    assert sorted(r["reason"] for r in reasons) == ["JudgeTimeoutError: took 5 s", "ValueError: bad"]


def test_parquet_rows_are_read_back_by_position(tmp_path: Path, scored: dict[str, Any]) -> None:
    out = tmp_path / "scored.parquet"
    main(["score", str(scored["default"][1]), "--no-progress", "--format", "json", "-o", str(out)])
    index = RolloutIndex(out)
    rows = _rows(scored["default"][1])
    for i in (0, 217, 399):
        assert index.detail(i)["response"] == rows[i]["response"]
        assert index.detail(i)["ground_truth"] == rows[i]["reward_model"]["ground_truth"]


def test_judger_view_serves_on_127_0_0_1_only(scored: dict[str, Any], tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "judger",
            "view",
            str(scored["default"][1]),
            "--no-browser",
            "--cache-dir",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert match, (line, proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
        url = match.group(0)
        for _ in range(100):
            try:
                page = httpx.get(url, timeout=2)
                break
            except httpx.TransportError:
                import time

                time.sleep(0.1)
        assert page.status_code == 200 and "app.js" in page.text
        assert httpx.get(url + "assets/vendor/katex/katex.min.js").status_code == 200
        assert httpx.get(url + "api/summary").json()["summary"]["samples"] == 400
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_page_of_another_host_name_is_refused(client: TestClient) -> None:
    # DNS rebinding: a site whose name resolves to 127.0.0.1 must not read the rollouts
    assert client.get("/api/summary", headers={"host": "evil.example"}).status_code == 400
    assert client.get("/api/summary", headers={"host": "localhost:8000"}).status_code == 200


def test_an_explicit_config_scores_every_sample_again_failures_included(tmp_path: Path) -> None:
    row = {"data_source": "openai/gsm8k", "prompt": "1+1?", "reward_model": {"ground_truth": "2"}}
    rows = [
        {**row, "response": "#### 2", "reward": {"score": 0.0, "acc": False}, "score": 0.0},
        {
            **row,
            "response": "#### 2",
            "reward": None,
            "status": "failed",
            "error_msg": "JudgeTimeoutError: 5 s",
            "judge_failure": {"judger": "gsm8k", "kind": "timeout"},
        },
    ]
    path = tmp_path / "scored.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = build_parser().parse_args(["view", str(path), "--preset", "gsm8k"])
    index = RolloutIndex(path, scorer=make_scorer(args), rescore=True)
    assert index.scored == 2
    assert index.counts(index.mask())["right"] == 2
    kept = RolloutIndex(path, scorer=make_scorer(args))
    assert kept.scored == 0
    assert kept.counts(kept.mask()) == {"right": 0, "wrong": 1, "failed": 0, "timed_out": 1, "skipped": 0}
