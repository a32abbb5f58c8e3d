"""A bounded load test on loopback: many requests at high concurrency, none lost, all correct."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from judger import JudgerConfig, NativeJudger, RolloutState, Status
from judger.server.app import create_app
from judger.testing import serve_asgi

CONCURRENCY = 64


async def parity(response: str | None, label: Any, extra_info: dict[str, Any]) -> dict[str, Any]:
    value = int(response or "0")
    return {"score": float(value % 7 == int(label)), "echo": value}


async def _load(n_requests: int) -> None:
    app = create_app(JudgerConfig(judger_name="parity", reward_handler=parity), max_concurrency=CONCURRENCY)
    states = [RolloutState(response=str(i), reward_model={"ground_truth": i % 2}) for i in range(n_requests)]
    with serve_asgi(app, timeout_graceful_shutdown=2) as srv:
        t0 = time.perf_counter()
        async with NativeJudger(reward_handler=srv.url + "/reward", max_concurrency=CONCURRENCY) as judger:
            judged = await judger.batch_judge(states)
        elapsed = time.perf_counter() - t0
        metrics = httpx.get(srv.url + "/metrics").text
    assert all(s.status is not Status.FAILED for s in judged)
    assert [s.reward for s in judged] == [
        {"score": float(i % 7 == i % 2), "echo": i} for i in range(n_requests)
    ]
    # no request was refused (503) or retried: the server saw exactly one request per sample
    assert f'judger_http_requests_total{{endpoint="/reward",code="200"}} {n_requests}' in metrics
    assert 'code="503"' not in metrics
    print(f"{n_requests} requests, concurrency {CONCURRENCY}: {elapsed:.1f} s ({n_requests / elapsed:.0f}/s)")


async def test_256_requests_at_concurrency_64() -> None:
    await _load(256)


@pytest.mark.slow
async def test_2000_requests_at_concurrency_64() -> None:
    # sustained: about thirty rounds of the whole concurrency, every one counted by the server
    await _load(2000)
