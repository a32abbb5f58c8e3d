"""`judger serve` as a real process, when judging fails: a hung sync handler costs its own samples
(504 at the deadline, its worker process killed) and every other request is judged; declared safe
on threads, it holds a fixed budget of threads and then gets a clear 503 (never one new thread per
call); and a sample that fails for itself answers a status no client retries, so judger's own URL
handler asks once."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from judger import NativeJudger, RolloutState, Status
from judger.testing.servers import free_port

pytestmark = pytest.mark.py310

CONFIG = """
import time
from judger import JudgerConfig

def handler(response, label, extra_info):
    if response == "hang":
        time.sleep(60)  # a scorer stuck for good (the server is stopped long before)
    if response == "bad":
        raise ValueError("cannot parse this answer")
    return {"score": float(response == label)}

judger_config = JudgerConfig(judger_name="threads", reward_handler=handler)
"""

WaitHealthy = Callable[[str, "subprocess.Popen[bytes]"], None]


def _serve(cfg: Path, port: int, args: list[str]) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "judger.cli.main", "serve", str(cfg), "--port", str(port), *args]
    env = {k: v for k, v in os.environ.items() if k != "JUDGER_SERVER_TOKEN"}
    return subprocess.Popen(
        [*cmd, "--log-level", "critical"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def _threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no thread count")


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


# more than any thread budget holds (min(32, cpus + 4) workers + 16 hung)
HUNG = 50


@pytest.mark.slow
async def test_hung_sync_handler_costs_only_its_own_samples(
    tmp_path: Path, wait_healthy: WaitHealthy
) -> None:
    cfg = tmp_path / "served.py"
    cfg.write_text(CONFIG)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = _serve(cfg, port, ["--set", "timeout=0.3"])
    try:
        wait_healthy(url, proc)
        async with httpx.AsyncClient(base_url=url, timeout=120) as client:
            first = await client.post("/reward", json={"response": "1", "label": "1"})
            before = _threads(proc.pid)
            hung = [
                asyncio.create_task(client.post("/reward", json={"response": "hang", "label": "1"}))
                for _ in range(HUNG)
            ]
            await asyncio.sleep(0.5)  # they are in: the next request queues behind them
            good = await client.post("/reward", json={"response": "1", "label": "1"})
            replies = await asyncio.gather(*hung)
            after = _threads(proc.pid)
            again = await client.post("/reward", json={"response": "2", "label": "1"})
    finally:
        proc.terminate()
        proc.wait(20)
    assert first.json() == {"score": 1.0}
    assert good.status_code == 200 and good.json() == {"score": 1.0}
    assert again.status_code == 200 and again.json() == {"score": 0.0}
    # each hung call timed out alone, and left no thread behind
    assert {r.status_code for r in replies} == {504}
    assert all("did not finish within 0.3 s" in r.json()["detail"] for r in replies)
    assert after - before <= 2, f"{before} -> {after} threads"


def test_hung_sync_handler_declared_safe_on_threads_holds_a_fixed_thread_budget_then_answers_503(
    tmp_path: Path, wait_healthy: WaitHealthy
) -> None:
    cfg = tmp_path / "served.py"
    cfg.write_text(CONFIG)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    budget = [
        *("--set", "execution=thread", "--set", "timeout=0.3"),
        *("--set", "num_threads=1", "--set", "max_hung_threads=2"),
    ]
    proc = _serve(cfg, port, budget)
    try:
        wait_healthy(url, proc)
        with httpx.Client(base_url=url, timeout=10) as client:
            assert client.post("/reward", json={"response": "1", "label": "1"}).json() == {"score": 1.0}
            before = _threads(proc.pid)
            for _ in range(2):
                assert client.post("/reward", json={"response": "hang", "label": "1"}).status_code == 504
            # two calls hang, a fresh thread serves the others at once
            started = time.monotonic()
            assert client.post("/reward", json={"response": "1", "label": "1"}).status_code == 200
            assert time.monotonic() - started < 1.0
            assert client.post("/reward", json={"response": "hang", "label": "1"}).status_code == 504
            # every thread of the budget hangs: each request fails at once with the reason
            replies = [
                client.post("/reward", json={"response": r, "label": "1"}) for r in ["hang"] * 20 + ["1"]
            ]
            started = time.monotonic()
            last = client.post("/reward", json={"response": "1", "label": "1"})
            assert time.monotonic() - started < 0.5
            after = _threads(proc.pid)
        assert {r.status_code for r in replies} == {503} and last.status_code == 503
        detail = last.json()["detail"]
        assert "ThreadBudgetError" in detail and 'execution="process"' in detail
        assert after - before <= 3, f"{before} -> {after} threads"  # the budget, not a thread per call
    finally:
        proc.terminate()
        proc.wait(20)


async def test_url_handler_asks_once_for_a_sample_that_fails_for_itself(
    tmp_path: Path, wait_healthy: WaitHealthy
) -> None:
    cfg = tmp_path / "served.py"
    cfg.write_text(CONFIG)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = _serve(cfg, port, [])
    try:
        wait_healthy(url, proc)
        # the server's worker processes start on its first sample: not what is timed here
        assert httpx.post(url + "/reward", json={"response": "1", "label": "1"}).status_code == 200
        async with NativeJudger(reward_handler=url + "/reward") as judger:
            out = await judger.judge(RolloutState(response="bad", reward_model={"ground_truth": "1"}))
        metrics = httpx.get(url + "/metrics").text
    finally:
        proc.terminate()
        proc.wait(20)
    assert out.status is Status.FAILED and "cannot parse this answer" in out.error_msg
    assert "HTTP 422" in out.error_msg and "not retried" in out.error_msg
    # one request, so no backoff either: the client sleeps only before a retry (a bound on the
    # elapsed time said the same and failed under load: 0.84 s against 0.5)
    assert _metric(metrics, 'judger_http_requests_total{endpoint="/reward",code="422"}') == 1
