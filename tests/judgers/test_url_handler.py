"""URL reward handlers against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from judger import JudgerConfig, NativeJudger, RolloutState, Status
from judger.core.errors import HandlerHTTPError
from judger.testing import serve_asgi
from judger.testing.servers import free_port

fastapi = pytest.importorskip("fastapi")
from fastapi import FastAPI, Request  # noqa: E402  (after the importorskip guard)
from fastapi.responses import JSONResponse, PlainTextResponse  # noqa: E402

pytestmark = pytest.mark.py310


def make_app() -> Any:
    # FastAPI resolves annotations from module globals, so Request must be imported at module level
    app = FastAPI()
    app.state.hits = Counter()
    app.state.peers = set()

    @app.post("/reward")
    async def reward(request: Request) -> dict:
        body = await request.json()
        app.state.hits["reward"] += 1
        app.state.peers.add(request.client.port)
        ok = str(body["response"]).strip() == str(body["label"])
        return {"score": 1.0 if ok else 0.0, "acc": ok, "extra": body["extra_info"]}

    @app.post("/flaky/{fails}/{code}")
    async def flaky(fails: int, code: int, request: Request) -> Any:
        body = await request.json()
        key = f"flaky:{body['response']}"
        app.state.hits[key] += 1
        if app.state.hits[key] <= fails:
            headers = {"Retry-After": "0"} if code == 429 else {}
            return JSONResponse({"detail": "try again"}, status_code=code, headers=headers)
        return {"score": 1.0}

    @app.post("/slow")
    async def slow() -> dict:
        await asyncio.sleep(5)
        return {"score": 1.0}

    @app.post("/badjson")
    async def badjson() -> Any:
        return PlainTextResponse("{not json", media_type="application/json")

    @app.post("/list")
    async def as_list() -> Any:
        return [1, 2]

    @app.post("/status/{code}")
    async def status(code: int, request: Request) -> Any:
        app.state.hits[f"status:{code}"] += 1
        return JSONResponse({"detail": "nope"}, status_code=code)

    return app


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    app = make_app()
    # the /slow handler's abandoned requests are not waited for at the end
    with serve_asgi(app, timeout_graceful_shutdown=0.5) as srv:
        srv.app = app
        yield srv


def state(response: str, label: str = "1") -> RolloutState:
    return RolloutState(response=response, reward_model={"ground_truth": label})


def judger_for(url: str, **kw: Any) -> NativeJudger:
    # a hang guard for a local server that answers in milliseconds: 200 requests on two busy
    # cores took over 2 s (the stress run); the tests of a request's timeout set their own
    kw.setdefault("request_timeout", 10.0)
    return NativeJudger(judger_name="remote_reward", reward_handler=url, **kw)


async def test_success_and_one_pooled_connection(server: Any) -> None:
    server.app.state.peers.clear()
    judger = JudgerConfig(
        judger_name="remote_reward",
        reward_handler=server.url + "/reward",
        extra_info={"k": "v"},
        max_concurrency=1,
    ).build()
    out = await judger.batch_judge([state("1"), state("2"), state(" 1 ")] * 10)
    assert [s.reward["score"] for s in out[:3]] == [1.0, 0.0, 1.0]
    assert out[0].reward["extra"] == {"k": "v"} and out[0].reward["acc"] is True
    # 30 sequential requests over one kept-alive connection, not a client per call
    assert len(server.app.state.peers) == 1
    await judger.aclose()


async def test_500_then_success_is_retried(server: Any) -> None:
    judger = judger_for(server.url + "/flaky/2/500", max_retries=3)
    s = await judger.judge(state("r500"))
    assert s.reward == {"score": 1.0}
    assert server.app.state.hits["flaky:r500"] == 3


async def test_429_is_retried_honouring_retry_after(server: Any) -> None:
    s = await judger_for(server.url + "/flaky/1/429").judge(state("r429"))
    assert s.reward == {"score": 1.0} and server.app.state.hits["flaky:r429"] == 2


async def test_4xx_is_not_retried(server: Any) -> None:
    s = await judger_for(server.url + "/status/404").judge(state("x"))
    assert s.status is Status.FAILED and "HTTP 404" in s.error_msg and "/status/404" in s.error_msg
    assert server.app.state.hits["status:404"] == 1


async def test_gives_up_after_retries_naming_url_and_status(server: Any) -> None:
    s = await judger_for(server.url + "/status/503", max_retries=2).judge(state("x"))
    assert s.status is Status.FAILED
    assert "HandlerHTTPError" in s.error_msg and "/status/503" in s.error_msg and "HTTP 503" in s.error_msg
    assert "3 attempts" in s.error_msg
    assert server.app.state.hits["status:503"] == 3


async def test_request_timeout_is_a_timeout_failure(server: Any) -> None:
    s = await judger_for(server.url + "/slow", request_timeout=0.2).judge(state("x"))
    assert s.status is Status.FAILED and "timeout" in s.error_msg
    assert s.extra_fields["judge_failure"]["kind"] == "timeout"
    # the request's own timeout is reported as such, naming the URL, not as the judge deadline
    assert s.error_msg.startswith("HandlerHTTPTimeout") and "/slow" in s.error_msg


async def test_judge_deadline_bounds_retries_too(server: Any) -> None:
    s = await judger_for(server.url + "/slow", request_timeout=10, timeout=0.3).judge(state("x"))
    assert s.status is Status.FAILED and "did not finish within 0.3 s" in s.error_msg


async def test_malformed_json_and_non_object_replies_are_errors(server: Any) -> None:
    s = await judger_for(server.url + "/badjson").judge(state("x"))
    assert s.status is Status.FAILED and "not valid JSON" in s.error_msg
    s = await judger_for(server.url + "/list").judge(state("x"))
    assert s.status is Status.FAILED and "must be a JSON object" in s.error_msg


async def test_connection_refused_is_retried_then_reported() -> None:
    url = f"http://127.0.0.1:{free_port()}/reward"
    judger = judger_for(url, max_retries=2)
    s = await judger.judge(state("x"))
    assert s.status is Status.FAILED and url in s.error_msg and "ConnectError" in s.error_msg
    with pytest.raises(HandlerHTTPError, match="3 attempts"):
        await judger_for(url, max_retries=2, on_error="raise").judge(state("x"))


async def test_batch_against_the_server_isolates_failures(server: Any) -> None:
    states = [state(str(i % 2)) for i in range(200)]
    out = await judger_for(server.url + "/reward", max_concurrency=16).batch_judge(states)
    assert [s.reward["score"] for s in out] == [float(i % 2 == 1) for i in range(200)]
