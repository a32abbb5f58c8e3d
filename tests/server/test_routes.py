"""The server's structure: one router module per protocol, sharing one ServerContext, with the guards
in front of every route. Each router serves its protocol mounted alone on a bare app, and answers
exactly as the guarded app's direct path does; every route but the open ones refuses a request
without the token, before reading its body, and every judging route has the body deadline."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from types import ModuleType
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from judger import BaseJudger, JudgerConfig
from judger.judgers.config import build_judger
from judger.server.app import create_app
from judger.server.body import BodyLimits
from judger.server.context import build_context
from judger.server.replies import install_error_handlers
from judger.server.routes import JUDGE_ROUTES, get_reward, judge, ops, reward
from judger.testing import serve_asgi

TOKEN = "s3cret"
# the only paths served without the token: liveness and the docs (the contract, not the server's list)
OPEN = {"/health", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"}


def exact(response: str | None, label: Any, extra_info: dict[str, Any]) -> dict[str, Any]:
    if response == "EXPLODE":
        raise ValueError("cannot score EXPLODE")
    acc = (response or "").strip() == str(label)
    return {"score": 1.0 if acc else 0.0, "acc": acc}


@pytest.fixture
async def live() -> AsyncIterator[BaseJudger]:
    judger = build_judger(JudgerConfig(judger_name="exact", reward_handler=exact))
    yield judger
    await judger.aclose()


def _alone(module: ModuleType, judger: BaseJudger) -> FastAPI:
    """A bare app serving one route module: the shared context, the error replies, its router."""
    app = FastAPI()
    build_context(judger, body_limits=BodyLimits(max_key_chars=32), close_judger=False).attach(app)
    install_error_handlers(app)
    app.include_router(module.router)
    return app


def _client(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


# per protocol: (query, body) of each request; FIRST_ANSWER: what the first one answers
REQUESTS: dict[str, list[tuple[str, bytes]]] = {
    "/reward": [
        ("", b'{"response": "4", "label": 4}'),
        ("", b'{"response": "5", "label": 4}'),
        ("", b'{"response": "EXPLODE", "label": 4}'),  # a failed sample: 422 with the failure
        ("", b'{"response": '),  # malformed: 400
        ("", b'{"response": "4", "lable": 4}'),  # an unknown field: 422 naming it
        ("", json.dumps({"response": "4", "extra_info": {"k" * 40: 1}}).encode()),  # key over the limit
    ],
    "/judge": [
        ("", b'{"response": "4", "reward_model": {"ground_truth": "4"}}'),
        ("", b'[{"response": "4", "reward_model": {"ground_truth": "4"}}, {"response": "EXPLODE"}]'),
        ("full=true", b'{"response": "5", "reward_model": {"ground_truth": "4"}}'),
        ("", b'{"response": "4", "reward": {"score": 1.0}}'),  # a posted reward: 422
        ("", b"[1, "),
    ],
    "/get_reward": [
        ("", b'{"query": ["Q 4"], "prompts": ["Q "], "labels": ["4"]}'),
        # a failed sample, and a query that does not start with its prompt
        (
            "",
            json.dumps(
                {"query": ["Q 4", "Q EXPLODE", "R 4"], "prompts": ["Q "] * 3, "labels": ["4"] * 3}
            ).encode(),
        ),
        ("", b'{"query": ["a", "b"], "labels": ["1"]}'),  # lengths differ: 422
        ("", b"{"),
    ],
}
FIRST_ANSWER = {
    "/reward": {"score": 1.0, "acc": True},
    "/judge": {"reward": {"score": 1.0, "acc": True}, "status": "completed", "error_msg": None},
    "/get_reward": {
        "rewards": [1.0],
        "scores": [1.0],
        "extra_logs": {"acc": [1.0], "judge_failed": [0.0]},
        "failures": [None],
    },
}
MODULES = {"/reward": reward, "/judge": judge, "/get_reward": get_reward}


def test_the_judge_routes_are_the_protocol_modules() -> None:
    assert [route.path for route in JUDGE_ROUTES] == list(MODULES)
    for route in JUDGE_ROUTES:
        assert route.router is MODULES[route.path].router and route.handle is MODULES[route.path].handle


@pytest.mark.parametrize("path", list(MODULES))
async def test_each_protocol_router_serves_alone(path: str, live: BaseJudger) -> None:
    app = _alone(MODULES[path], live)
    async with _client(app) as client:
        query, body = REQUESTS[path][0]
        reply = await client.post(f"{path}?{query}", content=body)
        assert reply.status_code == 200 and reply.json() == FIRST_ANSWER[path]
        for other in set(MODULES) - {path}:  # it needs none of the other protocols
            assert (await client.post(other, content=REQUESTS[other][0][1])).status_code == 404


async def test_the_ops_router_serves_alone(live: BaseJudger) -> None:
    app = _alone(ops, live)
    async with _client(app) as client:
        health = await client.get("/health")
        metrics = await client.get("/metrics")
    assert health.status_code == 200 and health.json()["judger"] == "exact"
    assert metrics.status_code == 200 and "judger_http_in_flight" in metrics.text


@pytest.mark.parametrize("path", list(MODULES))
async def test_router_and_guard_direct_path_answer_alike(path: str, live: BaseJudger) -> None:
    """The guarded app answers protocol requests from the guard (no framework routing); the router
    alone answers through FastAPI: the same handler, so the same status and body for each request."""
    guarded = create_app(live, body_limits=BodyLimits(max_key_chars=32), close_judger=False)
    statuses = set()
    async with _client(_alone(MODULES[path], live)) as alone, _client(guarded) as direct:
        for query, body in REQUESTS[path]:
            url = f"{path}?{query}" if query else path
            by_router, by_guard = await alone.post(url, content=body), await direct.post(url, content=body)
            assert (by_router.status_code, by_router.json()) == (by_guard.status_code, by_guard.json()), body
            statuses.add(by_guard.status_code)
    assert {200, 400, 422} <= statuses  # answers and refusals both compared
    # the guarded app's answers came through its guard (it counted them), the bare app's not
    assert _requests(guarded, path) == len(REQUESTS[path])


def _requests(app: FastAPI, path: str) -> int:
    prefix = f'judger_http_requests_total{{endpoint="{path}"'
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in app.state.metrics.render().splitlines()
        if line.startswith(prefix)
    )


def _routes(app: FastAPI) -> list[tuple[str, str]]:
    """Every (method, path) the app routes, routers included (FastAPI >= 0.165 keeps an included
    router as one entry of ``app.routes``)."""
    try:
        from fastapi.routing import iter_route_contexts  # type: ignore[attr-defined,unused-ignore]
    except ImportError:  # older FastAPI copies an included router's routes into the app's
        routes: list[Any] = list(app.routes)
    else:
        routes = list(iter_route_contexts(app.routes))
    return sorted({(method, r.path) for r in routes for method in (r.methods or ()) if method != "HEAD"})


# every (method, path) the server routes, read from an app built as the server builds it (building
# one starts nothing); a route added anywhere in create_app is a new case of the tests below
ROUTES = _routes(create_app(JudgerConfig(judger_name="exact", reward_handler=exact)))


def test_the_routes_cover_every_protocol() -> None:
    protocols = {("POST", route.path) for route in JUDGE_ROUTES}
    assert protocols | {("GET", "/health"), ("GET", "/metrics"), ("GET", "/openapi.json")} <= set(ROUTES)


@pytest.mark.parametrize(("method", "path"), ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
async def test_every_route_but_the_open_ones_needs_the_token(
    method: str, path: str, live: BaseJudger
) -> None:
    app = create_app(live, token=TOKEN, close_judger=False)
    async with _client(app) as client:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
            reply = await client.request(method, path, headers=headers, content=b"{}")
            if path in OPEN:
                assert reply.status_code != 401, (headers, reply.text)
            else:
                assert reply.status_code == 401, (headers, reply.status_code, reply.text)
                assert reply.headers["www-authenticate"] == "Bearer"
        authorized = await client.request(
            method, path, headers={"Authorization": f"Bearer {TOKEN}"}, content=b"{}"
        )
        assert authorized.status_code != 401


async def _raw(port: int, request: bytes, wait: float) -> tuple[bytes, float]:
    """Send ``request`` (a head whose body may never come) and read the reply: bytes, seconds."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    started = time.monotonic()
    writer.write(request)
    await writer.drain()
    try:
        data = await asyncio.wait_for(reader.read(4096), wait)
    finally:
        writer.close()
    return data, time.monotonic() - started


def test_guards_act_before_the_body_on_every_judge_route() -> None:
    """A judging request that announces a body and never sends it: without the token it is refused
    at once (its body is never waited for); with it, the body deadline answers 408."""
    app = create_app(JudgerConfig(judger_name="exact", reward_handler=exact), token=TOKEN, body_timeout=0.5)
    posts = [path for method, path in _routes(app) if method == "POST"]
    assert set(posts) == {route.path for route in JUDGE_ROUTES}, "a POST route outside JUDGE_ROUTES"
    with serve_asgi(app, timeout_graceful_shutdown=2) as server:
        for path in posts:
            head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n"
            unauthenticated, _ = asyncio.run(_raw(server.port, f"{head}\r\n{{".encode(), 20))
            assert unauthenticated.startswith(b"HTTP/1.1 401"), (path, unauthenticated[:80])
            auth = f"Authorization: Bearer {TOKEN}\r\n"
            trickled, seconds = asyncio.run(_raw(server.port, f"{head}{auth}\r\n{{".encode(), 20))
            assert trickled.startswith(b"HTTP/1.1 408"), (path, trickled[:80])
            assert seconds >= 0.4
