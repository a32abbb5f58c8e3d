"""Hostile request bodies and clients against the app, each attack as
a test over real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from judger import JudgerConfig
from judger.server.app import create_app
from judger.server.body import BodyLimits
from judger.server.metrics import MAX_LABEL_VALUES, ServerMetrics
from judger.testing import serve_asgi

pytestmark = pytest.mark.py310


def exact(response: str | None, label: Any, extra_info: dict[str, Any]) -> dict[str, Any]:
    return {"score": float((response or "") == str(label))}


@pytest.fixture
def server() -> Iterator[str]:
    app = create_app(
        JudgerConfig(judger_name="exact", reward_handler=exact), max_concurrency=4, body_timeout=1.0
    )
    with serve_asgi(app) as srv:
        yield srv.url


def test_huge_key_count_refused_fast_with_a_small_reply(server: str) -> None:
    """300k unknown keys in one /judge body blocked the loop 54 s and came back as 16.5 MB."""
    body = json.dumps({f"k{i}": 0 for i in range(300_000)}).encode()
    assert len(body) > 3_000_000
    started = time.perf_counter()
    reply = httpx.post(
        server + "/judge", content=body, headers={"content-type": "application/json"}, timeout=60
    )
    assert time.perf_counter() - started < 5.0
    assert reply.status_code == 422 and "300000 keys > limit of 1024" in reply.json()["message"]
    assert len(reply.content) < 2048


def test_long_keys_refused_with_a_small_reply(server: str) -> None:
    """40 keys of 150 kB gave a 30 MB reply."""
    body = json.dumps({("x" * 150_000) + str(i): 1 for i in range(40)}).encode()
    reply = httpx.post(
        server + "/judge", content=body, headers={"content-type": "application/json"}, timeout=60
    )
    assert reply.status_code == 422 and "longer than 256 characters" in reply.json()["message"]
    assert len(reply.content) < 2048
    # a few unknown keys still get their did-you-mean hints, and only a few are named
    typo = httpx.post(server + "/judge", json={"respnse": "1", **{f"zjunk{i}": 1 for i in range(500)}})
    assert typo.status_code == 422 and "did you mean 'response'" in typo.json()["message"]
    assert len(typo.content) < 2048


def test_deep_nesting_refused(server: str) -> None:
    deep: Any = 1
    for _ in range(200):
        deep = [deep]
    reply = httpx.post(server + "/reward", json={"response": "1", "label": deep})
    assert reply.status_code == 422 and "nested deeper than 32" in reply.json()["message"]
    # deeper than the JSON parser's own recursion limit
    body = b'{"response": "1", "label": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    reply = httpx.post(server + "/reward", content=body, headers={"content-type": "application/json"})
    assert reply.status_code == 422 and "nested deeper than 32" in reply.json()["message"]


async def _slow_body(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"POST /reward HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100\r\n\r\n{"
    )
    await writer.drain()
    return reader, writer


async def test_slow_bodies_hold_no_judging_slot() -> None:
    """Connections that send headers and one byte of the body held every slot."""
    # every client here is 127.0.0.1: the per-client cap is set above what the test opens
    app = create_app(
        JudgerConfig(judger_name="exact", reward_handler=exact),
        max_concurrency=8,
        body_timeout=1.5,
        max_client_requests=64,
    )
    with serve_asgi(app) as srv:
        slow = [await _slow_body(srv.port) for _ in range(12)]
        await asyncio.sleep(0.3)
        async with httpx.AsyncClient(base_url=srv.url, timeout=10) as client:
            health = (await client.get("/health")).json()
            assert health["in_flight"] == 0  # reading a body holds no judging slot
            real = await asyncio.gather(
                *(client.post("/reward", json={"response": "1", "label": "1"}) for _ in range(8))
            )
            assert [r.status_code for r in real] == [200] * 8
            # the slow clients are answered 408 and disconnected at the body deadline
            for reader, writer in slow:
                head = await asyncio.wait_for(reader.read(200), 10)
                assert head.startswith(b"HTTP/1.1 408"), head
                writer.close()
            metrics = (await client.get("/metrics")).text
    assert 'judger_http_rejected_total{reason="body_timeout"} 12' in metrics


async def test_one_client_cannot_hold_every_connection() -> None:
    app = create_app(
        JudgerConfig(judger_name="exact", reward_handler=exact), max_client_requests=3, body_timeout=5
    )
    with serve_asgi(app) as srv:
        slow = [await _slow_body(srv.port) for _ in range(3)]
        await asyncio.sleep(0.3)
        async with httpx.AsyncClient(base_url=srv.url, timeout=10) as client:
            refused = await client.post("/reward", json={"response": "1", "label": "1"})
            assert refused.status_code == 429 and "retry-after" in refused.headers
            assert (await client.get("/health")).status_code == 200
            for _, writer in slow:
                writer.close()
            await asyncio.sleep(0.3)
            assert (await client.post("/reward", json={"response": "1", "label": "1"})).status_code == 200


def test_posted_telemetry_is_refused(server: str) -> None:
    """A posted status / judge_failure reached the metrics, and came back failed, unexplained."""
    cases = [
        ({"response": "1", "status": "failed"}, "status"),
        ({"response": "1", "reward": {"score": 1.0}}, "reward"),
        ({"response": "1", "error_msg": "x"}, "error_msg"),
        (
            {"response": "1", "extra_fields": {"judge_failure": {"judger": "evil", "kind": "k1"}}},
            "judge_failure",
        ),
    ]
    for body, field in cases:
        reply = httpx.post(server + "/judge", json=body)
        assert reply.status_code == 422 and field in reply.json()["message"], (body, reply.text)
    ok = httpx.post(server + "/judge", json={"response": "1", "reward_model": {"ground_truth": "1"}}).json()
    assert ok == {"reward": {"score": 1.0}, "status": "completed", "error_msg": None}
    metrics = httpx.get(server + "/metrics").text
    assert "evil" not in metrics and "k1" not in metrics


def test_metric_labels_are_bounded() -> None:
    metrics = ServerMetrics()
    for i in range(5000):
        metrics.sample("judger", "ok", verdict=f"verdict {i}")
        metrics.sample(f"judger {i}", f"outcome {i}")
    text = metrics.render()
    assert len(metrics.verdicts) <= MAX_LABEL_VALUES + 1 and len(metrics.samples) <= 2 * MAX_LABEL_VALUES + 2
    assert len(text) < 64 * 1024 and 'verdict="other"' in text and 'outcome="error"' in text


def test_body_limits_are_validated() -> None:
    with pytest.raises(ValueError, match="max_depth"):
        BodyLimits(max_depth=0)


def test_a_lost_body_parser_is_replaced(server: str) -> None:
    """A costly body is parsed in another process; losing that process (the OOM killer) must not
    fail every later costly body (a concurrent.futures pool broke for good)."""
    headers = {"content-type": "application/json"}
    # over KEY_BUDGET colons, each object within the key limits: parsed in the parser process
    body = json.dumps([{"response": "2", "reward_model": {"ground_truth": "2"}}] * 8_000).encode()
    before = {p.pid for p in multiprocessing.active_children()}
    first = httpx.post(server + "/judge", content=body, headers=headers, timeout=60)
    assert first.status_code == 200 and len(first.json()) == 8_000
    parsers = [p for p in multiprocessing.active_children() if p.pid not in before]
    assert parsers, "the costly body was not parsed in a separate process"
    for process in parsers:
        os.kill(process.pid, signal.SIGKILL)
        process.join(10)
    again = httpx.post(server + "/judge", content=body, headers=headers, timeout=60)
    assert again.status_code == 200, again.text[:300]
    assert all(s["reward"]["score"] == 1.0 for s in again.json())


@pytest.mark.parametrize("body", [b"null", b"5", b"true", b'"text"', b"-0.5"])
def test_a_scalar_body_is_refused_as_such(server: str, body: bytes) -> None:
    """Found by schemathesis against `judger serve`: a JSON `null` body was a 500 (the shape check
    took every body for an object or a list)."""
    for path in ("/reward", "/judge", "/get_reward"):
        reply = httpx.post(server + path, content=body, headers={"content-type": "application/json"})
        assert reply.status_code == 422, (path, body, reply.status_code, reply.text)
        assert "object" in reply.json()["detail"], reply.text  # says what it expected


def test_a_boolean_query_parameter_takes_booleans_only(server: str) -> None:
    """Also schemathesis: `/judge?full=null` was answered as if it said false."""
    state = {"response": "2", "reward_model": {"ground_truth": "2"}}
    for value in ("null", "maybe", ""):
        reply = httpx.post(server + "/judge", params={"full": value}, json=state)
        assert reply.status_code == 422 and "full: expected a boolean" in reply.json()["detail"], reply.text
    for value, whole in (("true", True), ("1", True), ("false", False), ("off", False)):
        reply = httpx.post(server + "/judge", params={"full": value}, json=state)
        assert reply.status_code == 200 and ("message" in reply.json()) is whole, (value, reply.text)
