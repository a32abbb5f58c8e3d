"""What one client makes a real ``judger serve --preset gsm8k`` process on 127.0.0.1 hold.

- three connections, each sending 96 MiB of request headers to ``/health`` and kept open: how
  each is answered and the server's resident memory before and at its peak;
- a chunked body that never ends, sent to ``/health``: how long until it is answered, and how;
- the per-client defaults on this machine, and what a client holding them all holds.

    python bench/bench_serve_memory.py
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from judger.testing.servers import free_port

MiB = 2**20


def _status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field}")


def _headers(port: int, total: int, held: list[socket.socket]) -> str:
    """Send ``total`` bytes of headers on a connection kept open (in ``held``) until the end."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    held.append(sock)
    line = b"X-Pad: " + b"a" * (64 * 1024 - 9) + b"\r\n"
    try:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        for _ in range(total // len(line)):
            sock.sendall(line)
        sock.sendall(b"\r\n")
    except OSError:
        pass
    try:
        return sock.recv(200).partition(b"\r\n")[0].decode() or "closed"
    except OSError as exc:
        return type(exc).__name__


def _endless_chunked(port: int) -> tuple[str, float]:
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.sendall(b"POST /health HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n")
    started = time.monotonic()
    sock.settimeout(60)
    try:
        while True:  # a chunk every 0.1 s, never the last one
            sock.sendall(b"4000\r\n" + b"x" * 0x4000 + b"\r\n")
            sock.settimeout(0.1)
            try:
                data = sock.recv(200)
                return data.partition(b"\r\n")[0].decode() or "closed", time.monotonic() - started
            except TimeoutError:
                continue
    except OSError as exc:
        return type(exc).__name__, time.monotonic() - started
    finally:
        sock.close()


def main() -> None:
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    port = free_port()
    cmd = [sys.executable, "-m", "judger.cli.main", "serve", "--preset", "gsm8k", "--port", str(port)]
    env = {k: v for k, v in os.environ.items() if k != "JUDGER_SERVER_TOKEN"}
    proc = subprocess.Popen([*cmd, "--log-level", "critical"], env=env)
    try:
        for _ in range(600):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        time.sleep(0.5)
        before = _status(proc.pid, "VmRSS")
        held: list[socket.socket] = []
        replies = [_headers(port, 96 * MiB, held) for _ in range(3)]
        peak = _status(proc.pid, "VmHWM")
        for sock in held:
            sock.close()
        print("| 3 x 96 MiB of headers to /health | answered | server RSS before | peak |")
        print("|---|---|---|---|")
        print(f"| | {', '.join(replies)} | {before / MiB:.0f} MiB | {peak / MiB:.0f} MiB |")
        answer, took = _endless_chunked(port)
        print(f"\nendless chunked body to /health: {answer} after {took:.2f} s")
    finally:
        proc.terminate()
        proc.wait(30)
    from judger.server.connections import default_max_client_connections, default_max_connections
    from judger.server.limits import (
        CONNECTION_OVERHEAD,
        DEFAULT_MAX_HEADER_BYTES,
        default_client_body_bytes,
        memory_bytes,
    )

    memory = memory_bytes()
    connections = default_max_client_connections(default_max_connections(), DEFAULT_MAX_HEADER_BYTES)
    headers = connections * (DEFAULT_MAX_HEADER_BYTES + CONNECTION_OVERHEAD)
    bodies = default_client_body_bytes(8 * MiB)
    print(
        f"\nper client on this machine ({memory / 2**30:.1f} GiB): {connections} connections holding at most "
        f"{headers / MiB:.0f} MiB of headers, {bodies / MiB:.0f} MiB of bodies in flight: "
        f"{(headers + bodies) / memory:.1%} of memory"
    )


if __name__ == "__main__":
    main()
