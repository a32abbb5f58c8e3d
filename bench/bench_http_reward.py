"""Throughput of a URL reward handler against `judger serve`, pooled vs a new client per request.

The server runs in its own process (`judger serve` on this file's ``bench_config``), so client and
server do not share a GIL. Rows, all at the same concurrency and on the same server:

- ``NativeJudger`` with ``reward_handler="http://.../reward"``: one pooled ``httpx.AsyncClient``.
- XTuner's way: ``async with httpx.AsyncClient() as c: await c.post(...)`` for every sample.
- a pooled client sending ``Connection: close``: a new TCP connection per request, without the
  cost of building a client (separates the two costs of XTuner's way).
- raw keep-alive sockets: no HTTP client library at all, an estimate of the server's ceiling.
- what-if: the same pooled httpx, split into 16 clients of 4 connections (httpcore's pool scans
  every connection, idle ones with a socket poll, on each request; smaller pools scan less).

Run: ``.venv/bin/python bench/bench_http_reward.py`` (``--help`` for sizes). Prints a markdown
section; every reply is checked against the expected reward.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from judger import JudgerConfig

_NUMBER = re.compile(r"-?\d+")


def last_number_reward(response: str | None, label: Any, extra_info: dict[str, Any]) -> dict[str, Any]:
    """A light GSM8K-like rule scorer: the last integer of the response against the label."""
    found = _NUMBER.findall(response or "")
    pred = found[-1] if found else None
    acc = pred == str(label)
    return {"score": 1.0 if acc else 0.0, "acc": acc, "pred": pred}


bench_config = JudgerConfig(judger_name="bench_rule", reward_handler=last_number_reward)


def _sample(i: int) -> tuple[str, str]:
    return f"Let me compute step by step... so the answer is {i % 10}", str(i % 7)


def _expected(i: int) -> float:
    return 1.0 if i % 10 == i % 7 else 0.0


async def run_native(url: str, n: int, concurrency: int) -> float:
    from judger import NativeJudger, RolloutState

    states = [
        RolloutState(response=_sample(i)[0], reward_model={"ground_truth": _sample(i)[1]}) for i in range(n)
    ]
    t0 = time.perf_counter()
    async with NativeJudger(reward_handler=url, max_concurrency=concurrency) as judger:
        judged = await judger.batch_judge(states)
    elapsed = time.perf_counter() - t0
    scores = [s.reward["score"] if s.reward else None for s in judged]
    assert scores == [_expected(i) for i in range(n)], "NativeJudger: wrong or missing rewards"
    return n / elapsed


async def run_new_client(url: str, n: int, concurrency: int) -> float:
    import httpx

    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> float:
        response, label = _sample(i)
        async with sem, httpx.AsyncClient(timeout=30.0) as client:
            reply = await client.post(url, json={"response": response, "label": label, "extra_info": {}})
            return float(reply.json()["score"])

    t0 = time.perf_counter()
    scores = await asyncio.gather(*(one(i) for i in range(n)))
    elapsed = time.perf_counter() - t0
    assert scores == [_expected(i) for i in range(n)], "new client per request: wrong rewards"
    return n / elapsed


async def run_connection_close(url: str, n: int, concurrency: int) -> float:
    import httpx

    sem = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=30.0, limits=limits, headers={"Connection": "close"}) as client:

        async def one(i: int) -> float:
            response, label = _sample(i)
            async with sem:
                reply = await client.post(url, json={"response": response, "label": label, "extra_info": {}})
                return float(reply.json()["score"])

        t0 = time.perf_counter()
        scores = await asyncio.gather(*(one(i) for i in range(n)))
        elapsed = time.perf_counter() - t0
    assert scores == [_expected(i) for i in range(n)], "Connection: close: wrong rewards"
    return n / elapsed


async def run_sharded(url: str, n: int, concurrency: int, shards: int = 16) -> float:
    import httpx

    sem = asyncio.Semaphore(concurrency)
    per = max(1, concurrency // shards)
    limits = httpx.Limits(max_connections=per, max_keepalive_connections=per)
    clients = [httpx.AsyncClient(timeout=30.0, limits=limits) for _ in range(shards)]

    async def one(i: int) -> float:
        response, label = _sample(i)
        async with sem:
            reply = await clients[i % shards].post(
                url, json={"response": response, "label": label, "extra_info": {}}
            )
            return float(reply.json()["score"])

    t0 = time.perf_counter()
    scores = await asyncio.gather(*(one(i) for i in range(n)))
    elapsed = time.perf_counter() - t0
    for client in clients:
        await client.aclose()
    assert scores == [_expected(i) for i in range(n)], "sharded pools: wrong rewards"
    return n / elapsed


async def run_raw_sockets(port: int, n: int, concurrency: int) -> float:
    todo = iter(range(n))
    scores: list[float] = [0.0] * n

    async def worker() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for i in todo:
            response, label = _sample(i)
            body = json.dumps({"response": response, "label": label, "extra_info": {}}).encode()
            head = b"POST /reward HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
            writer.write(head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
            headers = await reader.readuntil(b"\r\n\r\n")
            length = int(re.search(rb"(?i)content-length:\s*(\d+)", headers).group(1))  # type: ignore[union-attr]
            scores[i] = float(json.loads(await reader.readexactly(length))["score"])
        writer.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - t0
    assert scores == [_expected(i) for i in range(n)], "raw sockets: wrong rewards"
    return n / elapsed


def start_server(port: int) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "judger.cli.main", "serve", f"{Path(__file__).resolve()}:bench_config"]
    cmd += ["--port", str(port), "--log-level", "warning", "--max-concurrency", "1024"]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE)
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"judger serve exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("judger serve did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=3000, help="requests per pooled run")
    parser.add_argument("--slow-requests", type=int, default=600, help="requests per new-client run")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--port", type=int, default=0, help="0: pick a free port")
    args = parser.parse_args()

    from judger.testing.servers import free_port

    port = args.port or free_port()
    url = f"http://127.0.0.1:{port}/reward"
    proc = start_server(port)
    rows: dict[str, list[float]] = {
        "NativeJudger, URL handler (pooled client)": [],
        "new httpx.AsyncClient per request (XTuner)": [],
        "pooled client, Connection: close (new TCP connection per request)": [],
        "raw keep-alive sockets (server ceiling estimate)": [],
        "what-if: 16 pooled clients of 4 keep-alive connections each": [],
    }
    names = list(rows)
    try:
        for _ in range(args.repeats):  # interleaved, so drift in machine load hits every row alike
            rows[names[0]].append(asyncio.run(run_native(url, args.requests, args.concurrency)))
            rows[names[1]].append(asyncio.run(run_new_client(url, args.slow_requests, args.concurrency)))
            rows[names[2]].append(
                asyncio.run(run_connection_close(url, args.slow_requests, args.concurrency))
            )
            rows[names[3]].append(asyncio.run(run_raw_sockets(port, args.requests, args.concurrency)))
            rows[names[4]].append(asyncio.run(run_sharded(url, args.requests, args.concurrency)))
    finally:
        proc.terminate()
        proc.wait(30)
    medians = {name: statistics.median(v) for name, v in rows.items()}
    base = medians[names[1]]
    print(f"## URL reward handler vs `judger serve` (concurrency {args.concurrency})\n")
    print(f"{os.cpu_count()} CPUs; server in its own process; median of {args.repeats} interleaved runs; ")
    print(f"{args.requests} requests per pooled run, {args.slow_requests} per new-connection run.\n")
    print("| client | requests/s (median) | runs | vs XTuner's way |")
    print("|---|---:|---|---:|")
    for name, values in rows.items():
        runs = ", ".join(f"{v:.0f}" for v in values)
        print(f"| {name} | {medians[name]:.0f} | {runs} | {medians[name] / base:.1f}x |")
    ratio = medians[names[0]] / base
    print(f"\nNativeJudger pooled vs a new client per request: **{ratio:.1f}x** (target >= 3x).")


if __name__ == "__main__":
    main()
