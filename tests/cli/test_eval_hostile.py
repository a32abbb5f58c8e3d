"""`judger eval` against a hostile server on 127.0.0.1 (judger.testing.hostile_openai): it ends within
its deadlines, in bounded memory, writes every row, and its exit code and report count the samples
that failed to be generated."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judger.cli.eval import EXIT_GENERATION_FAILURES, EXIT_OK, EXIT_UNUSABLE
from judger.cli.main import main
from judger.testing.fake_openai import PolicyServer
from judger.testing.hostile_openai import HostileServer, PeakRSS
from judger.trainer.io import example_data

GSM8K = example_data("gsm8k_test.jsonl")
MiB = 2**20


@pytest.fixture
def hostile() -> Iterator[HostileServer]:
    server = HostileServer(model="policy", drip_interval=0.2).start()
    yield server
    server.stop()


def run_eval(
    capsys: pytest.CaptureFixture[str], urls: list[str], out: Path, *extra: str
) -> tuple[int, dict[str, Any] | None, float]:
    argv = [
        "eval",
        str(GSM8K),
        "--limit",
        "2",
        "-n",
        "2",
        "--format",
        "json",
        "--no-progress",
        "-o",
        str(out),
    ]
    for url in urls:
        argv += ["--base-url", url]
    argv += ["--request-timeout", "2", "--max-retries", "1", "--max-reply-bytes", str(MiB), *extra]
    capsys.readouterr()
    start = time.monotonic()
    code = main(argv)
    took = time.monotonic() - start
    lines = capsys.readouterr().out.strip().splitlines()
    return code, (json.loads(lines[-1]) if lines else None), took


def written(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("mode", ["gzip_bomb", "endless", "huge"])
def test_eval_fails_oversized_replies_in_bounded_memory_and_time(
    hostile: HostileServer, capsys: pytest.CaptureFixture[str], tmp_path: Path, mode: str
) -> None:
    hostile.mode = mode
    hostile.bomb_bytes = 48 * MiB
    out = tmp_path / "scored.jsonl"
    with PeakRSS() as rss:
        code, report, took = run_eval(capsys, [hostile.url], out)
    assert code == EXIT_GENERATION_FAILURES
    assert report is not None and report["generation"]["failed_samples"] == 4
    assert rss.growth < 300 * MiB
    assert took < 2 * (2.0 + 1.0)  # two attempts, each within its deadline plus a second
    assert out.stat().st_size < 64 * 1024  # no reply body ended up in a row
    rows = written(out)
    assert len(rows) == 4 and all(r["status"] == "failed" and "cap" in r["error_msg"] for r in rows)


@pytest.mark.parametrize(
    ("mode", "content", "why"),
    [
        # 2 MiB of text under 16 token ids (64 MiB was judged, scored 1.0, exit 0 and written)
        ("huge", "The answer is 18. #### 18", "bytes of completion for max_tokens=16"),
        # a token id for each character: 61 of them
        ("ok", "Let me think about it for a good while. The answer is #### 18", "61 completion tokens"),
    ],
)
def test_eval_fails_a_completion_longer_than_asked(
    hostile: HostileServer,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    mode: str,
    content: str,
    why: str,
) -> None:
    hostile.mode = mode
    hostile.huge_bytes = 2 * MiB
    hostile.content = content  # the first prompt's right answer
    out = tmp_path / "scored.jsonl"
    limits = ["--limit", "1", "--max-tokens", "16", "--max-reply-bytes", str(16 * MiB)]
    code, report, _ = run_eval(capsys, [hostile.url], out, *limits)
    assert code == EXIT_GENERATION_FAILURES
    assert report is not None and report["generation"]["failed_samples"] == 2 and report["judged"] == 0
    rows = written(out)
    assert len(rows) == 2 and all(r["status"] == "failed" and r["reward"] is None for r in rows)
    assert all(why in r["error_msg"] and "not judged" in r["error_msg"] for r in rows), rows[0]["error_msg"]
    assert out.stat().st_size < 64 * 1024  # the row keeps what a 16-token reply could hold


@pytest.mark.parametrize(("text", "word"), [("\\boxed{42} \ud800", "UTF-8"), ("\\boxed{42}\x00", "NUL")])
def test_eval_writes_every_row_when_a_reply_holds_unwritable_text(
    hostile: HostileServer, capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, word: str
) -> None:
    hostile.content = text
    out = tmp_path / "scored.jsonl"
    code, report, _ = run_eval(capsys, [hostile.url], out)
    assert code == EXIT_GENERATION_FAILURES
    assert report is not None and report["generation"]["failed_samples"] == 4
    rows = written(out)
    assert len(rows) == 4 and all(r["status"] == "failed" and word in r["error_msg"] for r in rows)


@pytest.mark.parametrize("finish", ["weird", None])
def test_eval_counts_an_unknown_finish_reason_as_failed(
    hostile: HostileServer, capsys: pytest.CaptureFixture[str], tmp_path: Path, finish: str | None
) -> None:
    hostile.mode = "finish_reason"
    hostile.finish_reason = finish
    code, report, _ = run_eval(capsys, [hostile.url], tmp_path / "scored.jsonl")
    assert code == EXIT_GENERATION_FAILURES
    assert report is not None and report["generation"]["failed_samples"] == 4


def test_eval_with_a_dripping_model_list_is_bounded(
    hostile: HostileServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    hostile.mode = "drip_models"
    code, _, took = run_eval(capsys, [hostile.url], tmp_path / "alone.jsonl", "--models-timeout", "1")
    assert code == EXIT_UNUSABLE and took < 1.0 + 1.0 + 1.0  # its deadline, a second, and start-up
    healthy = PolicyServer("policy")
    try:
        healthy.fake.responder = lambda prompt, j: "The answer is 18. #### 18"
        urls = [hostile.url, healthy.url]
        code, report, took = run_eval(capsys, urls, tmp_path / "both.jsonl", "--models-timeout", "1")
    finally:
        healthy.stop()
    assert code == EXIT_OK and report is not None and report["generation"]["failed_samples"] == 0
    assert took < 1.0 + 1.0 + 1.0


def test_without_max_tokens_the_text_is_held_to_the_token_ids_sent() -> None:
    from judger.cli.completion_length import MAX_BYTES_PER_TOKEN, overlong
    from judger.core.rollout import RolloutState, Status

    def reply(text: str, ids: list[int] | None) -> RolloutState:
        return RolloutState(response=text, response_ids=ids, status=Status.COMPLETED)

    assert overlong(reply("x" * (2 * MAX_BYTES_PER_TOKEN), [1, 2]), None) is None
    reason = overlong(reply("x" * (2 * MAX_BYTES_PER_TOKEN + 1), [1, 2]), None)
    assert reason is not None and "the 2 token ids it sent" in reason
    assert overlong(reply("x" * 10**6, None), None) is None  # nothing to hold it to
    assert overlong(reply("é" * 2049, None), 16) is not None  # counted in bytes: 4 KiB is the most
