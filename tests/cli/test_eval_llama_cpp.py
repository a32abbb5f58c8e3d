"""`judger eval` against a server that behaves as llama.cpp's does (judger.testing.fake_openai.
LlamaCppFake: ``n`` ignored, no token ids): every sample of ``-n 4`` is generated, the change of
course is said once, and every row carries its token counts from the server's ``usage``."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from judger.cli.main import main
from judger.testing.fake_openai import LlamaCppFake, PolicyServer, render_chat
from judger.trainer.io import example_data

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

GSM8K = example_data("gsm8k_test.jsonl")


@pytest.fixture
def llama() -> Iterator[PolicyServer]:
    served = PolicyServer(fake=LlamaCppFake())
    served.fake.responder = lambda prompt, j: "Let me think. #### 18"
    yield served
    served.stop()


def test_eval_n_on_a_server_that_ignores_n(
    llama: PolicyServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """Before: every sample failed ("asked for 4 choices, the server sent 1"), exit 4."""
    out = tmp_path / "scored.jsonl"
    argv = ["eval", str(GSM8K), "--base-url", llama.url, "-n", "4", "--limit", "3", "--temperature", "1"]
    argv += ["--seed", "3", "-o", str(out), "--format", "json", "--no-progress", "--preset", "gsm8k"]
    with caplog.at_level(logging.WARNING):
        code = main(argv)
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    gen = report["generation"]
    assert code == 0 and gen["failed_samples"] == 0 and gen["generated_samples"] == 12, report
    said = [r.getMessage() for r in caplog.records if "ignores n" in r.getMessage()]
    assert len(said) == 1, said
    # each prompt's 4 samples: 4 requests (the first asked n=4 and got one), 4 seeds
    bodies = list(llama.fake.requests)
    assert len(bodies) == 3 + 9 and sorted(b.get("seed") for b in bodies).count(3) == 3
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 12
    for row in rows:
        # no token ids from this server: the counts come from each request's usage
        assert row["response_tokens"] == len(row["response"]) > 0
        assert row["prompt_tokens"] == len(render_chat(row["prompt"]))
    assert gen["by_data_source"]["openai/gsm8k"]["with_tokens"] == 12
