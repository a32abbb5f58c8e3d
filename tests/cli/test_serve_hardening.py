"""`judger serve` as a real process: token from a file (kept out of `ps`), the Host header check,
Ctrl-C during start-up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from judger.cli.main import main
from judger.testing.servers import free_port

CONFIG = """
from judger import JudgerConfig

def handler(response, label, extra_info):
    return {"score": float(response == label)}

judger_config = JudgerConfig(judger_name="hardened", reward_handler=handler)
"""

SLOW_START_CONFIG = """
import pathlib, sys, time
from judger import JudgerConfig

pathlib.Path(__file__).with_suffix(".loading").write_text("x")
time.sleep(30)  # a judger that takes long to load (a model, a big import)

def handler(response, label, extra_info):
    return {"score": 1.0}

judger_config = JudgerConfig(judger_name="slow_start", reward_handler=handler)
"""


def _serve(args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "judger.cli.main", "serve", *args, "--log-level", "warning"]
    clean = {k: v for k, v in os.environ.items() if k != "JUDGER_SERVER_TOKEN"}
    return subprocess.Popen(cmd, env={**clean, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_token_file_and_host_header(
    tmp_path: Path, wait_healthy: Callable[[str, subprocess.Popen[bytes]], None]
) -> None:
    cfg = tmp_path / "served.py"
    cfg.write_text(CONFIG)
    secret = tmp_path / "token"
    secret.write_text("file-token-123\n")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = _serve([str(cfg), "--port", str(port), "--token-file", str(secret)])
    try:
        wait_healthy(url, proc)
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        assert b"file-token-123" not in cmdline
        body = {"response": "1", "label": "1"}
        assert httpx.post(url + "/reward", json=body).status_code == 401
        auth = {"Authorization": "Bearer file-token-123"}
        assert httpx.post(url + "/reward", json=body, headers=auth).json() == {"score": 1.0}
        # DNS rebinding: a page on another name that resolves here must not reach the judger
        rebound = httpx.post(url + "/reward", json=body, headers={**auth, "Host": "evil.example"})
        assert rebound.status_code == 400
        assert httpx.get(url + "/health", headers={"Host": "evil.example"}).status_code == 400
        assert httpx.get(url + "/health", headers={"Host": f"localhost:{port}"}).status_code == 200
    finally:
        proc.terminate()
        proc.wait(20)


def test_token_argument_warns_and_bad_token_file(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    cfg = tmp_path / "served.py"
    cfg.write_text(CONFIG)
    assert main(["serve", str(cfg), "--token-file", str(tmp_path / "missing")]) == 2
    assert "--token-file: cannot read" in capsys.readouterr().err
    (tmp_path / "empty").write_text("\n")
    assert main(["serve", str(cfg), "--token-file", str(tmp_path / "empty")]) == 2
    assert "is empty" in capsys.readouterr().err
    assert main(["serve", str(cfg), "--token", "a", "--token-file", str(tmp_path / "empty")]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(["serve", str(cfg), "--failure-reward", "lots"]) == 2
    assert "--failure-reward" in capsys.readouterr().err


def test_ctrl_c_during_start_up_is_clean(tmp_path: Path) -> None:
    cfg = tmp_path / "slow_start.py"
    cfg.write_text(SLOW_START_CONFIG)
    proc = _serve([str(cfg), "--port", str(free_port())])
    try:
        deadline = time.monotonic() + 30
        while not cfg.with_suffix(".loading").exists():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(20)
        err = proc.stderr.read().decode() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 130, err
    assert "Traceback" not in err and "interrupted during start-up" in err
