"""What one client can make a real ``judger serve`` process on 127.0.0.1 hold in memory: a
request's headers are capped before the token is checked (431), a body sent to a route that takes
none is refused unread (413), a client's judging bodies in flight are capped (429), and by default
its connections and bodies stay within a small share of the memory the server may use."""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from judger.server.limits import CONNECTION_OVERHEAD, memory_bytes
from judger.testing.servers import free_port

CONFIG = """
from judger import JudgerConfig

async def handler(response, label, extra_info):
    return {"score": float(response == label)}

judger_config = JudgerConfig(judger_name="memory", reward_handler=handler)
"""

pytestmark = pytest.mark.py310

WaitHealthy = Callable[[str, "subprocess.Popen[bytes]"], None]
MiB = 2**20


def _serve(tmp_path: Path, args: list[str]) -> tuple[subprocess.Popen[bytes], int]:
    cfg = tmp_path / "served.py"
    cfg.write_text(CONFIG)
    port = free_port()
    cmd = [sys.executable, "-m", "judger.cli.main", "serve", str(cfg), "--port", str(port), *args]
    env = {k: v for k, v in os.environ.items() if k != "JUDGER_SERVER_TOKEN"}
    proc = subprocess.Popen(
        [*cmd, "--log-level", "critical"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    return proc, port


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def _status(sock: socket.socket, timeout: float = 10.0) -> bytes:
    """The status line the server answered on ``sock`` (b"" if it closed without one)."""
    sock.settimeout(timeout)
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    except ConnectionResetError:
        pass
    return data.partition(b"\r\n")[0]


def _closes(sock: socket.socket, timeout: float = 5.0) -> bool:
    """Whether the server closes ``sock`` (whatever it sends first) within ``timeout`` seconds."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass
    except TimeoutError:
        return False
    return True


def _flood_headers(port: int, path: str, total: int) -> bytes:
    """Send ``total`` bytes of headers (then the blank line) and return the status line answered."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    line = b"X-Pad: " + b"a" * (64 * 1024 - 9) + b"\r\n"
    try:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode())
        sent = 0
        while sent < total:
            sock.sendall(line)
            sent += len(line)
        sock.sendall(b"\r\n")
    except OSError:  # the server closed the connection: what it answered is still to be read
        pass
    try:
        return _status(sock)
    finally:
        sock.close()


def test_headers_are_capped_before_the_token_is_checked(tmp_path: Path, wait_healthy: WaitHealthy) -> None:
    token = tmp_path / "token"
    token.write_text("secret\n")
    proc, port = _serve(tmp_path, ["--token-file", str(token)])
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc)
        start = _peak_rss(proc.pid)
        # an open path and a path that needs the token, three times over: each is refused as its
        # headers pass the cap, not read whole (96 MB of them were, and answered 200)
        replies = [_flood_headers(port, path, 32 * MiB) for path in ("/health", "/reward", "/health")]
        growth = _peak_rss(proc.pid) - start
        # headers under the cap are a request as any other; over it, whole in one packet, they are not
        sized: dict[int, bytes] = {}
        for pad in (20_000, 40_000):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * pad + b"\r\n\r\n")
            sized[pad] = _status(sock)
            sock.close()
    finally:
        _stop(proc)
    assert all(r.startswith(b"HTTP/1.1 431") or r == b"" for r in replies), replies
    assert any(r.startswith(b"HTTP/1.1 431") for r in replies), replies
    assert growth < 16 * MiB, f"the server grew by {growth / MiB:.0f} MiB"
    assert sized[20_000].startswith(b"HTTP/1.1 200") and sized[40_000].startswith(b"HTTP/1.1 431")


def test_a_body_sent_to_a_route_that_takes_none_is_refused_unread(
    tmp_path: Path, wait_healthy: WaitHealthy
) -> None:
    proc, port = _serve(tmp_path, ["--body-timeout", "30"])
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc)
        # a chunked body that never ends, on an open path: held 30 s (8 MiB of it) before the 405
        chunked = socket.create_connection(("127.0.0.1", port), timeout=10)
        chunked.sendall(
            b"POST /health HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
            + b"4000\r\n"
            + b"x" * 0x4000
            + b"\r\n"
        )
        started = time.monotonic()
        refused = _status(chunked, timeout=5)
        took = time.monotonic() - started
        closed = _closes(chunked)
        chunked.close()
        declared = socket.create_connection(("127.0.0.1", port), timeout=10)
        declared.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10\r\n\r\n")
        metrics = _status(declared, timeout=5)
        declared.close()
    finally:
        _stop(proc)
    assert refused.startswith(b"HTTP/1.1 413") and took < 3 and closed
    assert metrics.startswith(b"HTTP/1.1 413")


def _hold_body(port: int, declared: int, sent: int) -> socket.socket:
    """A /reward request whose body is ``declared`` bytes long, ``sent`` of them sent (and no more)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    head = (
        f"POST /reward HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {declared}\r\n\r\n"
    ).encode()
    # JSON whitespace: a body of any size that is still a valid request
    sock.sendall(head + b'{"response": "1", "label": "1"' + b" " * (sent - 30))
    return sock


def test_one_clients_bodies_in_flight_are_capped(tmp_path: Path, wait_healthy: WaitHealthy) -> None:
    limits = ["--max-body-bytes", "600000", "--max-client-body-bytes", "1000000", "--body-timeout", "30"]
    proc, port = _serve(tmp_path, limits)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc)
        first = _hold_body(port, 600_000, 550_000)
        time.sleep(0.5)  # the server has read what was sent
        second = _hold_body(port, 600_000, 500_000)
        over = _status(second, timeout=5)
        second.close()
        # the first finishes and is judged; what it held is free again
        tail = b" " * (600_000 - 550_000 - 1) + b"}"
        first.sendall(tail)
        judged = _status(first, timeout=10)
        first.close()
        again = _hold_body(port, 600_000, 550_000)
        again.sendall(tail)
        after = _status(again, timeout=10)
        again.close()
    finally:
        _stop(proc)
    assert over.startswith(b"HTTP/1.1 429"), over
    assert judged.startswith(b"HTTP/1.1 200") and after.startswith(b"HTTP/1.1 200")


def test_by_default_one_client_holds_a_small_share_of_memory() -> None:
    """The defaults `judger serve` runs with: a client's connections at their header cap, and its
    judging bodies, each within a small share of the memory the server may use (the per-client
    connection cap was the open-files limit less 64, ~15,000, with no cap on headers)."""
    from judger.cli import serve as serve_cli
    from judger.cli.serve_limits import uvicorn_options
    from judger.server.connections import current_limits
    from judger.server.limits import default_client_body_bytes

    parser = argparse.ArgumentParser()
    serve_cli.add_arguments(parser)
    args = parser.parse_args(["--preset", "gsm8k"])
    options = uvicorn_options(args)
    limits = current_limits()
    memory = memory_bytes()
    per_connection = limits.max_header_bytes + CONNECTION_OVERHEAD
    assert limits.max_client_connections * per_connection <= memory // 64
    assert options["h11_max_incomplete_event_size"] == limits.max_header_bytes
    assert default_client_body_bytes(args.max_body_bytes) <= max(args.max_body_bytes, memory // 16)
    # a small machine's client gets fewer connections than a big machine's, never none
    from judger.server.connections import default_max_client_connections

    assert default_max_client_connections(60_000, 32 * 1024, memory=2 * 2**30) == 682
    assert default_max_client_connections(60_000, 32 * 1024, memory=2**20) == 1
