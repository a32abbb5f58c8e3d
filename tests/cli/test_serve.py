"""`judger serve` as a real process: token from the environment, graceful shutdown, argument errors."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from judger.cli.main import main
from judger.testing.servers import free_port

pytestmark = pytest.mark.py310

CONFIG = """
import asyncio
from judger import JudgerConfig

async def handler(response, label, extra_info):
    if response == "SLOW":
        await asyncio.sleep(1.5)
    return {"score": float(response == label), "pid_marker": "served"}

judger_config = JudgerConfig(judger_name="cli_served", reward_handler=handler)
"""


def test_serve_process_token_and_graceful_shutdown(
    tmp_path: Path, wait_healthy: Callable[[str, subprocess.Popen[bytes]], None]
) -> None:
    cfg = tmp_path / "served.py"
    cfg.write_text(CONFIG)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "JUDGER_SERVER_TOKEN": "env-token"}
    cmd = [
        sys.executable,
        "-m",
        "judger.cli.main",
        "serve",
        str(cfg),
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_healthy(url, proc)
        body = {"response": "1", "label": "1"}
        assert httpx.post(url + "/reward", json=body).status_code == 401
        auth = {"Authorization": "Bearer env-token"}
        assert httpx.post(url + "/reward", json=body, headers=auth).json() == {
            "score": 1.0,
            "pid_marker": "served",
        }

        slow: dict[str, httpx.Response] = {}
        thread = threading.Thread(
            target=lambda: slow.update(
                r=httpx.post(url + "/reward", json={"response": "SLOW"}, headers=auth, timeout=20)
            )
        )
        thread.start()
        for _ in range(200):
            if httpx.get(url + "/health").json()["in_flight"] == 1:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)  # the request in flight still gets its answer
        thread.join(20)
        assert slow["r"].status_code == 200 and slow["r"].json()["score"] == 0.0
        # uvicorn re-raises the signal once it has shut down, so supervisors see SIGTERM
        assert proc.wait(20) in (0, -signal.SIGTERM)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serve_argument_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve"]) == 2
    assert "give a CONFIG or --preset" in capsys.readouterr().err
    assert main(["serve", str(tmp_path / "missing.py")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["serve", "--preset", "NoSuchJudgerConfig"]) == 2
    assert "unknown preset" in capsys.readouterr().err


def test_the_serving_guides_client_runs_as_written(
    tmp_path: Path,
    wait_healthy: Callable[[str, subprocess.Popen[bytes]], None],
    readme_snippet: Callable[..., str],
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "judger.cli.main", "serve", "--preset", "gsm8k", "--port", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_healthy(url, proc)
        script = tmp_path / "client.py"
        script.write_text(readme_snippet("serve-client", URL=repr(url)))
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "{'score': 1.0, 'acc': True, 'pred': '72'}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
