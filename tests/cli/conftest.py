"""Shared by the tests that start ``judger serve`` as a real process."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

import httpx
import pytest

WaitHealthy = Callable[[str, "subprocess.Popen[bytes]"], None]


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            stderr = proc.stderr.read() if proc.stderr else b""
            raise AssertionError(f"judger serve exited with {proc.returncode}: {stderr!r}")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError("judger serve did not become healthy")


@pytest.fixture
def wait_healthy() -> WaitHealthy:
    """``wait_healthy(url, proc)``: returns once ``/health`` answers 200; fails if ``proc`` exits."""
    return _wait_healthy
