"""A hostile-client run against a real ``judger serve`` process on 127.0.0.1:
slow bodies, huge key counts, long keys, deep nesting, quadratic-shaped answers, all at once and
bounded in count and time, while a separate prober process checks that ``/health`` keeps answering
within 1 s and honest requests keep getting their rewards."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import pytest

from judger.testing.servers import free_port

pytestmark = pytest.mark.py310

# The prober runs in its own process so that building attack bodies here cannot delay it.
PROBE = r"""
import json, socket, sys, time
port, seconds = int(sys.argv[1]), float(sys.argv[2])
request = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
latencies, failures = [], []
end = time.monotonic() + seconds
while time.monotonic() < end:
    started = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(request)
            data = b""
            while True:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
        if not data.startswith(b"HTTP/1.1 200"):
            failures.append(data[:80].decode(errors="replace"))
    except OSError as exc:
        failures.append(repr(exc))
    latencies.append(time.monotonic() - started)
    time.sleep(0.05)
print(json.dumps({"latencies": latencies, "failures": failures}))
"""


async def _http(port: int, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
    """One request on its own connection (Connection: close), raw: status and body."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    writer.write(head + body)
    await writer.drain()
    data = await reader.read()
    writer.close()
    status = int(data.split(b" ", 2)[1])
    return status, data.split(b"\r\n\r\n", 1)[1]


async def _slow_body(port: int, hold: float) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"POST /reward HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100\r\n\r\n{"
    )
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(100), hold)
    finally:
        writer.close()


def _wait_healthy(port: int, proc: subprocess.Popen[bytes]) -> None:
    import httpx

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError("judger serve did not become healthy")


@pytest.mark.slow
# serial: a latency bound of the server's own making; another worker's tests on the same cores
# would put their time into it (on 2 cores beside three other workers: one probe of 1.3 s)
@pytest.mark.serial
async def test_health_answers_within_1s_under_hostile_clients() -> None:
    # every attack body is built before the run starts
    huge_keys = json.dumps({f"k{i}": 0 for i in range(300_000)}).encode()
    long_keys = json.dumps({("x" * 150_000) + str(i): 1 for i in range(40)}).encode()
    deep_body = b'{"response": "1", "label": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    open_tags = json.dumps({"response": "<answer>" * 32_768, "label": "x"}).encode()  # 256 kB
    many_pairs = json.dumps({"response": "<answer>x</answer>" * 200_000, "label": "x"}).encode()  # 3.4 MB
    batch = json.dumps(
        [
            {
                "response": "<answer>" * 8_000 + f"<answer>{i}</answer>",
                "reward_model": {"ground_truth": {"target": [str(i)]}},
            }
            for i in range(64)
        ]
    ).encode()
    honest = json.dumps({"response": "<answer>Paris</answer>", "label": "paris"}).encode()

    port = free_port()
    cmd = [
        sys.executable, "-m", "judger.cli.main", "serve", "--preset", "QAExactMatchJudgerConfig",
        "--set", "timeout=2", "--port", str(port), "--body-timeout", "5", "--log-level", "error",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "JUDGER_SERVER_TOKEN"}
    server = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_healthy(port, server)
        probe_seconds = 15.0
        prober = subprocess.Popen(
            [sys.executable, "-c", PROBE, str(port), str(probe_seconds)], stdout=subprocess.PIPE
        )
        started = time.monotonic()
        slow = [asyncio.create_task(_slow_body(port, 12.0)) for _ in range(60)]
        await asyncio.sleep(0.2)
        attacks = [
            *(_http(port, "POST", "/judge", huge_keys) for _ in range(3)),
            _http(port, "POST", "/judge", long_keys),
            _http(port, "POST", "/reward", deep_body),
            *(_http(port, "POST", "/reward", open_tags) for _ in range(5)),
            *(_http(port, "POST", "/reward", many_pairs) for _ in range(2)),
            *(_http(port, "POST", "/judge", batch) for _ in range(3)),
        ]
        honest_calls = [_http(port, "POST", "/reward", honest) for _ in range(20)]
        results = await asyncio.gather(*attacks, *honest_calls)
        slow_replies = await asyncio.gather(*slow)
        attack_seconds = time.monotonic() - started
        out, _ = await asyncio.to_thread(prober.communicate, timeout=probe_seconds + 30)
        probe = json.loads(out)
        assert server.poll() is None, "the server died"
    finally:
        server.terminate()
        server.wait(30)

    statuses = [status for status, _ in results]
    assert statuses[:3] == [422] * 3 and all(len(body) < 2048 for _, body in results[:5])
    assert statuses[3] == 422 and statuses[4] == 422
    assert statuses[5:10] == [200] * 5 and all(json.loads(b)["score"] == 0.0 for _, b in results[5:10])
    assert statuses[10:12] == [200] * 2 and json.loads(results[10][1])["score"] == 0.25  # tag spam
    assert statuses[12:15] == [200] * 3
    judged = json.loads(results[12][1])  # the first <answer> opens the answer, as in verl: all wrong
    assert len(judged) == 64 and all(
        r["status"] == "completed" and r["reward"]["score"] == 0.0 for r in judged
    )
    assert [s for s, _ in results[15:]] == [200] * 20
    assert all(json.loads(b) == {"score": 1.0, "acc": True, "pred": "Paris"} for _, b in results[15:])
    assert all(reply.startswith(b"HTTP/1.1 408") for reply in slow_replies), slow_replies[:3]
    assert attack_seconds < 60
    assert probe["failures"] == [] and len(probe["latencies"]) > 50
    assert max(probe["latencies"]) < 1.0, sorted(probe["latencies"])[-5:]
