"""`judger score --html`: one self-contained file with the report, plots and capped examples."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("math_verify")

from judger.cli.html_report import ReportSample
from judger.cli.main import main
from judger.core.rollout import RolloutState, Status
from judger.testing.fake_openai import PolicyServer
from judger.trainer.io import example_data

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]


def _embedded(page: str) -> dict[str, Any]:
    match = re.search(r"<script>window\.JUDGER_REPORT = (.*?);</script>", page, re.S)
    assert match, "no embedded report"
    data: dict[str, Any] = json.loads(match.group(1))
    return data


def _score_html(path: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], str]:
    code = main(["score", str(path), "--format", "json", "--no-progress", "--html", str(out)])
    assert code in (0, 3)
    return json.loads(capsys.readouterr().out), out.read_text(encoding="utf-8")


def test_html_report_holds_the_json_report_and_fetches_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    summary, page = _score_html(example_data("math_rollouts_dev.jsonl"), tmp_path / "r.html", capsys)
    data = _embedded(page)
    assert data["summary"] == summary
    # nothing is loaded from anywhere: no src= / href= to a file or URL, fonts inlined
    markup = re.sub(r"<script>.*?</script>|<style>.*?</style>", "", page, flags=re.S)
    assert "<script>" in page and not re.search(r"(src|href)=[\"'](?!data:)", markup)
    assert "url(fonts/" not in page
    assert page.count("url(data:font/woff2;base64,") >= 20
    source = summary["data_sources"]["DigitalLearningGmbH/MATH-lighteval"]
    wrong = round((1 - source["accuracy"]) * source["samples"])
    verdicts = [e["verdict"] for e in data["examples"]]
    assert verdicts.count("wrong") == min(5, wrong) and verdicts.count("right") == 5
    plots = data["plots"]["DigitalLearningGmbH/MATH-lighteval"]
    assert sum(plots["histogram"]["counts"]) == 400
    assert plots["pass_at_k"]["k"] == [2, 4, 8]


def test_model_text_cannot_close_the_script_it_is_embedded_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evil = "</script><script>alert(1)</script> The answer is 2. #### 2"
    rows = tmp_path / "evil.jsonl"
    row = {
        "data_source": "openai/gsm8k",
        "prompt": "1+1?",
        "response": evil,
        "reward_model": {"ground_truth": "2"},
    }
    rows.write_text(json.dumps(row) + "\n")
    _, page = _score_html(rows, tmp_path / "r.html", capsys)
    assert "<script>alert(1)" not in page
    assert _embedded(page)["examples"][0]["response"] == evil


def _state(i: int, score: float | None) -> RolloutState:
    state = RolloutState(message=[{"role": "user", "content": f"q{i}"}], response="x" * i, data_source="d")
    if score is None:
        state.status = Status.FAILED
        state.error_msg = f"ValueError: {i % 3}"
        state.extra_fields["judge_failure"] = {"judger": "d", "kind": "error"}
    else:
        state.reward = {"score": score, "acc": score > 0}
    return state


def test_report_sample_stays_bounded_and_counts_every_failure() -> None:
    sample = ReportSample(per_verdict=3, points=100)
    for start in range(0, 5000, 500):
        sample.add(_state(i, None if i % 10 == 0 else float(i % 2)) for i in range(start, start + 500))
    summary = {"data_sources": {"d": {"metrics": {}}}}
    data = sample.payload(summary)
    assert len(data["plots"]["d"]["length_vs_score"]["length"]) == 100
    assert sum(data["plots"]["d"]["histogram"]["counts"]) == 4500  # every score, not the sample
    assert [e["verdict"] for e in data["examples"]] == ["wrong"] * 3 + ["failed"] * 3 + ["right"] * 3
    assert sum(r["count"] for r in data["failure_reasons"]["d"]) == 500


def test_judger_eval_writes_the_same_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server = PolicyServer("policy")
    try:
        out = tmp_path / "eval.html"
        argv = ["eval", str(example_data("gsm8k_test.jsonl")), "--base-url", server.url, "--limit", "3"]
        code = main([*argv, "-n", "2", "--no-progress", "--format", "json", "--html", str(out)])
    finally:
        server.stop()
    assert code in (0, 3)
    summary = json.loads(capsys.readouterr().out)
    page = out.read_text(encoding="utf-8")
    assert _embedded(page)["summary"] == summary
    assert "<title>judger eval:" in page
