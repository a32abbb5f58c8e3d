"""`judger serve` against minimal FastAPI apps calling the same scorer, side by side in one run.

Two workloads: single ``/reward`` requests (one GSM8K sample each) and ``/judge`` with 64 states a
request. Each server runs alone in its own process under the same uvicorn settings (uvloop and
httptools when installed, access log off); the rounds alternate baseline / judger so the noise of a
shared machine hits both. The client is raw asyncio streams with HTTP/1.1 keep-alive and
pre-encoded requests (httpx costs about 6 ms of CPU a request here: it would be the bottleneck).

    python bench/bench_server.py [--seconds 3] [--rounds 3] [--connections 32]
"""

# no `from __future__ import annotations`: FastAPI reads the baseline endpoints' annotations at run time

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))


# --- the baselines: what a user would write by hand ---------------------------------------------


def baseline_app() -> Any:
    """A minimal FastAPI app over the GSM8K scorer: a pydantic body, the scorer, a JSON reply."""
    from fastapi import FastAPI
    from pydantic import BaseModel

    from judger.scorers.math.gsm8k import compute_score

    class RewardIn(BaseModel):
        response: str | None
        label: Any = None

    class StateIn(BaseModel):
        response: str | None
        reward_model: dict[str, Any]

    app = FastAPI()

    @app.post("/reward")
    async def reward(body: RewardIn) -> dict[str, Any]:
        return compute_score(body.response, body.label)

    @app.post("/judge")
    async def judge(body: list[StateIn]) -> list[dict[str, Any]]:
        return [{"reward": compute_score(s.response, s.reward_model.get("ground_truth"))} for s in body]

    return app


def judger_app() -> Any:
    from judger.presets import GSM8KJudgerConfig
    from judger.server.app import create_app

    return create_app(GSM8KJudgerConfig())


def serve(which: str, port: int) -> None:
    import uvicorn

    app = baseline_app() if which == "baseline" else judger_app()
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="error", access_log=False)


# --- the client ----------------------------------------------------------------------------------


def request_bytes(path: str, body: Any) -> bytes:
    data = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    ).encode()
    return head + data


async def _connection(port: int, requests: list[bytes], stop: float, counts: list[int]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    i = 0
    try:
        while time.perf_counter() < stop:
            writer.write(requests[i % len(requests)])
            i += 1
            head = await reader.readuntil(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"server answered {head[:40]!r}")
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            await reader.readexactly(length)
            counts[0] += 1
    finally:
        writer.close()


async def drive(port: int, requests: list[bytes], seconds: float, connections: int) -> float:
    """Requests per second over ``seconds`` with ``connections`` keep-alive connections."""
    counts = [0]
    await asyncio.gather(*(_connection(port, requests, time.perf_counter() + 0.3, [0]) for _ in range(2)))
    started = time.perf_counter()
    stop = started + seconds
    await asyncio.gather(*(_connection(port, requests, stop, counts) for _ in range(connections)))
    return counts[0] / (time.perf_counter() - started)


# --- the app alone: CPU per request without sockets (far less noisy on a shared machine) --------


async def _asgi_once(app: Any, path: str, body: bytes) -> int:
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 2), "state": {},
    }  # fmt: skip
    delivered = False
    status = 0

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    return status


async def asgi_costs(n: int) -> dict[str, dict[str, float]]:
    """Microseconds per request of each app called in-process, best of 5 alternating runs."""
    apps = {"baseline": baseline_app(), "judger": judger_app()}
    out: dict[str, dict[str, float]] = {}
    for name, (path, requests) in workloads().items():
        body = requests[0].split(b"\r\n\r\n", 1)[1]
        count = n if path == "/reward" else max(1, n // 10)
        best = {which: float("inf") for which in apps}
        for _ in range(5):
            for which, app in apps.items():
                started = time.perf_counter()
                for _ in range(count):
                    assert await _asgi_once(app, path, body) == 200
                best[which] = min(best[which], (time.perf_counter() - started) / count * 1e6)
        out[name] = best
    return out


# --- the run -------------------------------------------------------------------------------------


def _start(which: str) -> tuple[subprocess.Popen[bytes], int]:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, __file__, "--serve", which, "--port", str(port)])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc, port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{which} server did not start")


def workloads() -> dict[str, tuple[str, list[bytes]]]:
    from judger.trainer.io import example_data

    # the reference solutions as responses, the final number as the label; every third one wrong
    with open(example_data("gsm8k_test.jsonl"), encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh][:256]
    samples = []
    for i, row in enumerate(rows):
        label = row["answer"].rsplit("####", 1)[1].strip()
        samples.append((row["answer"] if i % 3 else row["answer"] + "1", label))
    single = [request_bytes("/reward", {"response": r, "label": g}) for r, g in samples]
    batches = [
        request_bytes(
            "/judge",
            [{"response": r, "reward_model": {"ground_truth": g}} for r, g in samples[i : i + 64]],
        )
        for i in range(0, len(samples), 64)
    ]
    return {"/reward (1 sample)": ("/reward", single), "/judge (64 states)": ("/judge", batches)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--serve", choices=("baseline", "judger"))
    parser.add_argument("--port", type=int)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port)
        return
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    results: dict[str, dict[str, list[float]]] = {}
    for name, (_, requests) in workloads().items():
        results[name] = {"baseline": [], "judger": []}
        conns = args.connections if "reward" in name else max(2, args.connections // 8)
        for _ in range(args.rounds):
            for which in ("baseline", "judger"):
                proc, port = _start(which)
                try:
                    rate = asyncio.run(drive(port, requests, args.seconds, conns))
                finally:
                    proc.terminate()
                    proc.wait(10)
                results[name][which].append(rate)
    costs = asyncio.run(asgi_costs(2000))
    print(
        f"{'app alone':<22}{'baseline us/req':>16}{'judger us/req':>14}{'ratio':>8}   (best of 5, in-process)"
    )
    for name, best in costs.items():
        ratio = best["baseline"] / best["judger"]
        print(f"{name:<22}{best['baseline']:>16.0f}{best['judger']:>14.0f}{ratio:>7.2f}x")
    header = f"{'over HTTP':<22}{'baseline req/s':>16}{'judger req/s':>14}{'ratio':>8}"
    print(f"{header}   (median of {args.rounds})")
    for name, rates in results.items():
        base, ours = statistics.median(rates["baseline"]), statistics.median(rates["judger"])
        ratios = [j / b for j, b in zip(rates["judger"], rates["baseline"])]
        print(
            f"{name:<22}{base:>16.0f}{ours:>14.0f}{ours / base:>7.2f}x   per round: "
            + " ".join(f"{r:.2f}" for r in ratios)
        )


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(HERE, "..", "src"))
    main()
