"""`judger serve` below HTTP, against a real process on 127.0.0.1: connections that never finish
their headers are closed at a deadline, open connections are capped below the open-files limit so
``/health`` keeps answering under a slow-loris flood, and ``X-Forwarded-For`` is believed only from
proxies the operator names."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from judger.cli.main import main
from judger.testing.servers import free_port

CONFIG = """
import asyncio
from judger import JudgerConfig

async def handler(response, label, extra_info):
    if response == "slow":
        await asyncio.sleep(1.0)
    return {"score": float(response == label)}

judger_config = JudgerConfig(judger_name="conns", reward_handler=handler)
"""

WaitHealthy = Callable[[str, "subprocess.Popen[bytes]"], None]


def _serve(cfg: Path, port: int, args: list[str], nofile: int | None = None) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "judger.cli.main", "serve", str(cfg), "--port", str(port)]
    env = {k: v for k, v in os.environ.items() if k not in ("JUDGER_SERVER_TOKEN", "FORWARDED_ALLOW_IPS")}

    def lower_fd_limit() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    return subprocess.Popen(
        [*cmd, *args, "--log-level", "critical"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=lower_fd_limit,
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _partial(port: int) -> socket.socket:
    """A connection that sends part of a request's headers and then nothing."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    return sock


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes ``sock`` (EOF or reset) within ``seconds``."""
    sock.settimeout(seconds)
    try:
        return sock.recv(4096) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def _response(sock: socket.socket) -> bytes:
    """One whole response read from a keep-alive connection (head and Content-Length body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(4096)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    while len(body) < length:
        body += sock.recv(4096)
    return head


def _health(port: int, timeout: float = 2.0) -> bytes:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := sock.recv(4096):
                data += chunk
            return data
    except OSError as exc:
        return repr(exc).encode()


def test_connections_that_never_finish_their_headers_are_closed(
    tmp_path: Path, wait_healthy: WaitHealthy
) -> None:
    cfg = tmp_path / "served.py"
    cfg.write_text(CONFIG)
    port = free_port()
    proc = _serve(cfg, port, ["--header-timeout", "1"])
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc)
        silent = socket.create_connection(("127.0.0.1", port), timeout=5)  # sends nothing at all
        partial = [_partial(port) for _ in range(4)]
        # headers sent in two parts within the deadline: an ordinary, slow-ish client
        honest = socket.create_connection(("127.0.0.1", port), timeout=5)
        honest.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        time.sleep(0.3)
        honest.sendall(b"\r\n")
        assert _response(honest).startswith(b"HTTP/1.1 200")
        started = time.monotonic()
        assert all(_closed_within(s, 4.0) for s in [silent, *partial])
        assert time.monotonic() - started < 4.0
        # after a response the connection waits for the next headers under the same deadline
        honest.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        assert _closed_within(honest, 4.0)
        for sock in [silent, *partial, honest]:
            sock.close()
        assert _health(port).startswith(b"HTTP/1.1 200")
    finally:
        _stop(proc)


def test_health_answers_while_more_slow_connections_are_held_than_the_fd_limit(
    tmp_path: Path, wait_healthy: WaitHealthy
) -> None:
    cfg = tmp_path / "served.py"
    cfg.write_text(CONFIG)
    port = free_port()
    # the server may open 256 files; the flood holds 300 connections (more than it could accept)
    proc = _serve(cfg, port, ["--header-timeout", "4"], nofile=256)
    held: list[socket.socket] = []
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc)
        held = [_partial(port) for _ in range(300)]
        replies = [_health(port) for _ in range(10)]
        assert all(r.startswith(b"HTTP/1.1 200") for r in replies), replies[:3]
        # every slow connection is closed: to make room, or at the header deadline
        assert all(_closed_within(s, 8.0) for s in held)
        assert proc.poll() is None
        assert _health(port).startswith(b"HTTP/1.1 200")
    finally:
        for sock in held:
            sock.close()
        _stop(proc)


async def _post(port: int, body: bytes, forwarded_for: str) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        (
            f"POST /reward HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"X-Forwarded-For: {forwarded_for}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode()
        + body
    )
    await writer.drain()
    data = await reader.read()
    writer.close()
    return int(data.split(b" ", 2)[1])


async def _spoofed_burst(port: int) -> list[int]:
    body = json.dumps({"response": "slow", "label": "slow"}).encode()
    return await asyncio.gather(*(_post(port, body, f"10.9.8.{i}") for i in range(6)))


def test_x_forwarded_for_does_not_escape_the_per_client_cap(
    tmp_path: Path, wait_healthy: WaitHealthy
) -> None:
    cfg = tmp_path / "served.py"
    cfg.write_text(CONFIG)
    port = free_port()
    proc = _serve(cfg, port, ["--max-client-requests", "2"])
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc)
        statuses = asyncio.run(_spoofed_burst(port))
    finally:
        _stop(proc)
    # a spoofed address per request: still one client, two requests through
    assert sorted(statuses) == [200, 200, 429, 429, 429, 429]

    # a proxy the operator names is believed: each forwarded client has its own cap
    port = free_port()
    proc = _serve(cfg, port, ["--max-client-requests", "2", "--trusted-proxy", "127.0.0.1"])
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc)
        statuses = asyncio.run(_spoofed_burst(port))
    finally:
        _stop(proc)
    assert statuses == [200] * 6


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--trusted-proxy", "*"], "--trusted-proxy: '*'"),
        (["--trusted-proxy", "proxy.example"], "not an IP address or network"),
        (["--header-timeout", "0"], "--header-timeout must be > 0"),
        (["--max-connections", "0"], "--max-connections must be >= 1"),
    ],
)
def test_connection_options_are_checked_at_start_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    cfg = tmp_path / "served.py"
    cfg.write_text(CONFIG)
    assert main(["serve", str(cfg), "--port", str(free_port()), *args]) == 2
    assert message in capsys.readouterr().err
