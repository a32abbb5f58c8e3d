"""The eval guide's data-path snippet (docs/tasks/eval.md) runs as written (its placeholders set), and
examples/agent_loop_to_train_data.py with and without a server, against fake policy servers; the
serving tier runs both against a real instruct model on vLLM."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from judger.testing.fake_openai import LlamaCppFake, PolicyServer
from judger.trainer.io import example_data

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

EXAMPLE = Path(__file__).parents[2] / "examples" / "agent_loop_to_train_data.py"


def example(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(EXAMPLE), *args], capture_output=True, text=True, timeout=120)


def test_the_data_path_snippet_runs_as_written(
    policy: PolicyServer, tmp_path: Path, readme_snippet: Callable[..., str]
) -> None:
    policy.fake.responder = lambda prompt, j: f"Let me think. #### {j}"
    script = tmp_path / "data_path.py"
    script.write_text(
        readme_snippet(
            "data-path",
            MODEL_DIR=repr("/models/fake-policy"),  # the fake's served name: no local tokenizer
            TRAIN_FILES=repr(str(example_data("gsm8k_test.jsonl"))),
            SERVERS=repr([policy.url]),
            BATCH_SIZE="2",
            GROUP_SIZE="2",
            MAX_TOKENS="64",
        )
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "4 training samples; skipped groups: none", done.stdout
    body = policy.fake.requests[-1]
    assert body["model"] == "/models/fake-policy" and body["max_tokens"] == 64 and body["n"] == 2


def test_the_example_with_its_fake_policy_and_with_a_server(policy: PolicyServer) -> None:
    alone = example()
    assert alone.returncode == 0 and "16 training samples, skipped groups: none" in alone.stdout, alone.stderr
    policy.fake.responder = lambda prompt, j: "4" if j % 2 else "5"
    served = example("--endpoint", policy.url)
    assert served.returncode == 0, served.stderr
    assert "16 training samples, skipped groups: none" in served.stdout and "advantage" in served.stdout


def test_the_example_stops_at_the_first_group_on_a_server_without_token_ids() -> None:
    """Before: it generated and judged every group, printed (None, None) and died with IndexError."""
    llama = PolicyServer(fake=LlamaCppFake())
    try:
        done = example("--endpoint", llama.url)
    finally:
        llama.stop()
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "stopped after the first group: the rollout server returned no token ids" in done.stderr
    assert "tokenize_responses=True" in done.stderr
    assert llama.fake.chat_requests == 4  # one group of 4: it ignores n, so 1 + 3 requests
