"""A real model server (vLLM, llama.cpp's) run by a test tier: one command in its own process group
on 127.0.0.1, its output in a log file, ready once ``GET /v1/models`` answers 200."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import httpx


class ServerProcess:
    """``command`` (which must listen on ``port``) as a server the test owns; ``name`` is what its
    errors call it. ``start`` may be called again after ``kill``: the same command, the same port."""

    def __init__(
        self, name: str, command: Sequence[str], port: int, log: Path, env: dict[str, str] | None = None
    ) -> None:
        self.name = name
        self.command = list(command)
        self.port = port
        self.log = log
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ServerProcess:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **(self.env or {})}
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                self.command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        return self

    def wait_ready(self, timeout: float) -> ServerProcess:
        assert self.proc is not None
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with {self.proc.returncode}; its log:\n{self.log_tail()}"
                )
            try:
                if httpx.get(f"{self.url}/v1/models", timeout=5.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(1.0)
        self.kill()
        raise RuntimeError(f"{self.name} not ready after {timeout:g} s; its log:\n{self.log_tail()}")

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_text()[-chars:] or "(no log)"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill(self) -> None:
        """SIGKILL the server's process group (the server and its workers), as a crash."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=60)
        self.proc = None

    def stop(self) -> None:
        """SIGTERM the process group, then SIGKILL what is left after 30 s."""
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
