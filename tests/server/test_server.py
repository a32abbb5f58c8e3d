"""`judger.server.app`: every endpoint, its guards and its metrics, over real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from judger import (
    CompassVerifierV2Config,
    ComposedJudgerConfig,
    JudgerConfig,
    NativeJudger,
    RolloutState,
    Status,
)
from judger.server.app import create_app
from judger.testing import serve_asgi
from judger.testing.fake_openai import FakeOpenAI

pytestmark = pytest.mark.py310

GATE = threading.Event()


def exact(response: str | None, label: Any, extra_info: dict[str, Any]) -> dict[str, Any]:
    if response == "EXPLODE":
        raise ValueError("cannot score EXPLODE")
    acc = (response or "").strip() == str(label)
    return {"score": 1.0 if acc else 0.0, "acc": acc, "tag": extra_info.get("tag")}


async def gated_or_slow(response: str | None, label: Any, extra_info: dict[str, Any]) -> dict[str, Any]:
    if response == "WAIT":
        while not GATE.is_set():
            await asyncio.sleep(0.01)
    if response == "HANG":
        await asyncio.sleep(30)
    return {"score": 1.0 if response == str(label) else 0.0}


@pytest.fixture
def server() -> Iterator[str]:
    app = create_app(JudgerConfig(judger_name="exact", reward_handler=exact), max_body_bytes=4096)
    with serve_asgi(app, timeout_graceful_shutdown=2) as srv:
        yield srv.url


def _metric(text: str, line_prefix: str) -> float:
    for line in text.splitlines():
        if line.startswith(line_prefix + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no metric line {line_prefix!r} in:\n{text}")


async def test_native_judger_url_handler_against_server(server: str) -> None:
    states = [
        RolloutState(
            response=str(i % 3), reward_model={"ground_truth": "1"}, extra_fields={"extra_info": {"tag": i}}
        )
        for i in range(60)
    ]
    async with NativeJudger(reward_handler=server + "/reward", extra_info={"tag": "static"}) as judger:
        judged = await judger.batch_judge(states)
    assert [s.reward for s in judged] == [
        {"score": float(i % 3 == 1), "acc": i % 3 == 1, "tag": i} for i in range(60)
    ]


def test_reward_endpoint_and_failures(server: str) -> None:
    reply = httpx.post(server + "/reward", json={"response": "4", "label": 4, "extra_info": {"tag": "x"}})
    assert reply.status_code == 200 and reply.json() == {"score": 1.0, "acc": True, "tag": "x"}
    failed = httpx.post(server + "/reward", json={"response": "EXPLODE", "label": "1"})
    assert failed.status_code == 422  # the sample fails again if sent again: not worth a retry
    body = failed.json()
    assert body["judge_failure"] == {"judger": "exact", "kind": "error", "message": body["detail"]}
    assert "cannot score EXPLODE" in body["detail"]


def test_reward_timeout_is_504() -> None:
    app = create_app(JudgerConfig(judger_name="slow", reward_handler=gated_or_slow, timeout=0.2))
    with serve_asgi(app) as srv:
        reply = httpx.post(srv.url + "/reward", json={"response": "HANG", "label": "1"})
    assert reply.status_code == 504 and reply.json()["judge_failure"]["kind"] == "timeout"


def test_judge_endpoint_single_and_list(server: str) -> None:
    one = httpx.post(server + "/judge", json={"response": "2", "reward_model": {"ground_truth": "2"}}).json()
    assert one == {
        "reward": {"score": 1.0, "acc": True, "tag": None},
        "status": "completed",
        "error_msg": None,
    }
    posted = [
        {"response": "2", "reward_model": {"ground_truth": "3"}, "rollout_id": 7},
        {"response": "EXPLODE", "reward_model": {"ground_truth": "3"}, "status": "completed"},
    ]
    light = httpx.post(server + "/judge", json=posted)
    assert light.status_code == 200
    ok, failed = light.json()
    assert set(ok) == {"reward", "status", "error_msg"} and ok["reward"]["score"] == 0.0
    assert failed["status"] == Status.FAILED.value and failed["reward"] is None
    assert "cannot score EXPLODE" in failed["error_msg"]
    ok, failed = httpx.post(server + "/judge", params={"full": "true"}, json=posted).json()
    assert ok["rollout_id"] == 7 and ok["reward"]["score"] == 0.0 and ok["response"] == "2"
    assert failed["status"] == Status.FAILED.value and failed["reward"] is None
    assert failed["extra_fields"]["judge_failure"] == {"judger": "exact", "kind": "error"}


def test_judge_keeps_xtuner_uid_and_rollout_id_in_step(server: str) -> None:
    # XTuner's deprecated uid fills rollout_id and back, as RolloutState's own validation does
    posted = [
        {"response": "2", "reward_model": {"ground_truth": "2"}, "uid": 5},
        {"response": "2", "reward_model": {"ground_truth": "2"}, "rollout_id": 7},
    ]
    by_uid, by_id = httpx.post(server + "/judge", params={"full": "true"}, json=posted).json()
    assert (by_uid["uid"], by_uid["rollout_id"]) == (5, 5)
    assert (by_id["uid"], by_id["rollout_id"]) == (7, 7)


def test_judge_empty_list_is_an_empty_answer(server: str) -> None:
    reply = httpx.post(server + "/judge", json=[])
    assert reply.status_code == 200 and reply.json() == []


def test_get_reward_openrlhf_protocol(server: str) -> None:
    body = {
        "query": ["Q1 4", "Q2 5", "Q3 EXPLODE"],
        "prompts": ["Q1 ", "Q2 ", "Q3 "],
        "labels": ["4", "6", "1"],
    }
    reply = httpx.post(server + "/get_reward", json=body).json()
    assert reply["rewards"] == [1.0, 0.0, 0.0] and reply["scores"] == [1.0, 0.0, 0.0]
    assert reply["extra_logs"] == {"acc": [1.0, 0.0, 0.0], "judge_failed": [0.0, 0.0, 1.0]}
    assert reply["failures"][:2] == [None, None]
    assert reply["failures"][2]["judger"] == "exact"
    assert "cannot score EXPLODE" in reply["failures"][2]["message"]


def _odd_acc(response: str, label: str, extra_info: Any = None) -> dict[str, Any]:
    # the acc a judger's author might compute: a count no float holds, a NaN, an infinity, text
    import numpy as np

    odd = {"huge": 10**400, "nan": float("nan"), "inf": float("inf"), "text": "yes"}
    odd |= {"np": np.bool_(True), "half": np.float32(0.5)}  # NumPy's values carry the number they hold
    return {"score": 1.0, "acc": odd.get(response, True)}


def test_get_reward_logs_are_numbers_openrlhf_can_carry() -> None:
    """OpenRLHF stacks and averages ``extra_logs``: a log value that is no finite number goes as 0.0
    (as text always did) and the batch is answered; an int past float's range raised OverflowError
    and failed the whole request, a NaN reached the client's step means."""
    app = create_app(JudgerConfig(judger_name="odd", reward_handler=_odd_acc))
    with serve_asgi(app) as srv:
        body = {"query": ["huge", "nan", "inf", "text", "ok", "np", "half"], "labels": ["1"] * 7}
        reply = httpx.post(srv.url + "/get_reward", json=body)
    assert reply.status_code == 200, reply.text
    logs = reply.json()["extra_logs"]
    assert logs["acc"] == [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.5] and logs["judge_failed"] == [0.0] * 7
    assert reply.json()["rewards"] == [1.0] * 7


def test_bad_requests_name_the_field(server: str) -> None:
    malformed = httpx.post(
        server + "/reward", content=b'{"response": ', headers={"content-type": "application/json"}
    )
    assert malformed.status_code == 400 and "JSON" in malformed.json()["message"]
    missing = httpx.post(server + "/reward", json={"label": "1"})
    assert missing.status_code == 422 and "response: Field required" in missing.json()["message"]
    typo = httpx.post(server + "/reward", json={"response": "1", "lable": "1"})
    assert typo.status_code == 422 and "lable" in typo.json()["message"]
    wrong_type = httpx.post(server + "/reward", json={"response": "1", "extra_info": [1]})
    assert wrong_type.status_code == 422 and "extra_info" in wrong_type.json()["message"]
    rollout_typo = httpx.post(server + "/judge", json={"respnse": "1"})
    assert rollout_typo.status_code == 422 and "did you mean 'response'" in rollout_typo.json()["message"]
    lengths = httpx.post(server + "/get_reward", json={"query": ["a", "b"], "labels": ["1"]})
    assert lengths.status_code == 422 and "labels has 1 items" in lengths.json()["message"]


def test_oversize_bodies_get_413(server: str) -> None:
    big = {"response": "x" * 5000, "label": "1"}
    assert httpx.post(server + "/reward", json=big).status_code == 413

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit applies while reading
        yield b'{"response": "'
        for _ in range(10):
            yield b"y" * 1000
        yield b'", "label": "1"}'

    reply = httpx.post(server + "/reward", content=chunks(), headers={"content-type": "application/json"})
    assert reply.status_code == 413 and "too large" in reply.json()["detail"]
    assert httpx.post(server + "/reward", json={"response": "1", "label": "1"}).status_code == 200
    metrics = httpx.get(server + "/metrics").text
    assert _metric(metrics, 'judger_http_rejected_total{reason="too_large"}') == 2


def test_bearer_token() -> None:
    app = create_app(JudgerConfig(judger_name="exact", reward_handler=exact), token="s3cret")
    body = {"response": "1", "label": "1"}
    with serve_asgi(app) as srv:
        assert httpx.post(srv.url + "/reward", json=body).status_code == 401
        wrong = httpx.post(srv.url + "/reward", json=body, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
        right = httpx.post(srv.url + "/reward", json=body, headers={"Authorization": "Bearer s3cret"})
        assert right.status_code == 200
        assert httpx.get(srv.url + "/metrics").status_code == 401
        assert httpx.get(srv.url + "/health").status_code == 200  # probes need no token


async def test_overload_answers_503_with_retry_after() -> None:
    GATE.clear()
    app = create_app(JudgerConfig(judger_name="gated", reward_handler=gated_or_slow), max_concurrency=2)
    with serve_asgi(app) as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=10) as client:
            held = [
                asyncio.create_task(client.post("/reward", json={"response": "WAIT", "label": "x"}))
                for _ in "ab"
            ]
            for _ in range(500):
                if (await client.get("/health")).json()["in_flight"] == 2:
                    break
                await asyncio.sleep(0.01)
            refused = await client.post("/reward", json={"response": "1", "label": "1"})
            assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
            GATE.set()
            assert [r.status_code for r in await asyncio.gather(*held)] == [200, 200]
            after = await client.post("/reward", json={"response": "1", "label": "1"})
            assert after.status_code == 200
            metrics = (await client.get("/metrics")).text
    assert _metric(metrics, 'judger_http_rejected_total{reason="overload"}') == 1
    assert _metric(metrics, 'judger_http_requests_total{endpoint="/reward",code="503"}') == 1


def test_metrics_count_samples_and_latency(server: str) -> None:
    for response in ("1", "2", "EXPLODE"):
        httpx.post(server + "/reward", json={"response": response, "label": "1"})
    httpx.post(server + "/judge", json=[{"response": "1"}, {"response": "EXPLODE"}])
    reply = httpx.get(server + "/metrics")
    assert reply.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = reply.text
    assert _metric(text, 'judger_samples_total{judger="exact",outcome="ok"}') == 3
    assert _metric(text, 'judger_samples_total{judger="exact",outcome="error"}') == 2
    assert _metric(text, 'judger_http_requests_total{endpoint="/reward",code="422"}') == 1
    assert _metric(text, 'judger_http_request_duration_seconds_count{endpoint="/reward"}') == 3
    assert _metric(text, 'judger_http_request_duration_seconds_bucket{endpoint="/reward",le="+Inf"}') == 3
    assert "# TYPE judger_http_request_duration_seconds histogram" in text


def test_openapi_describes_the_endpoints(server: str) -> None:
    spec = httpx.get(server + "/openapi.json").json()
    assert {"/reward", "/judge", "/get_reward", "/health", "/metrics"} <= set(spec["paths"])
    schemas = spec["components"]["schemas"]
    assert set(schemas["RewardRequest"]["properties"]) == {"response", "label", "extra_info", "data_source"}
    assert "response" in schemas["RewardRequest"]["required"]
    assert set(schemas["GetRewardRequest"]["properties"]) == {"query", "prompts", "labels", "data_sources"}
    assert "413" in spec["paths"]["/reward"]["post"]["responses"]
    assert httpx.get(server + "/docs").status_code == 200


def test_the_judge_schema_is_what_the_server_enforces(server: str) -> None:
    # schemathesis, run against `judger serve`, found /judge documented as "any RolloutState"
    # while the server refuses judger-written fields; the schema now says what it takes
    spec = httpx.get(server + "/openapi.json").json()
    body = spec["paths"]["/judge"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    ref = {"$ref": "#/components/schemas/PostedRolloutState"}
    assert body == {"anyOf": [ref, {"type": "array", "items": ref}]}
    posted = spec["components"]["schemas"]["PostedRolloutState"]["properties"]
    assert posted["status"]["enum"] == ["init", "completed"]
    assert posted["reward"]["type"] == posted["error_msg"]["type"] == "null"
    assert posted["extra_fields"]["not"] == {"required": ["judge_failure"]}
    state = {"response": "2", "reward_model": {"ground_truth": "2"}}
    for refused in ({"status": "expired"}, {"reward": {"score": 1}}, {"extra_fields": {"judge_failure": 1}}):
        assert httpx.post(server + "/judge", json={**state, **refused}).status_code == 422, refused
    for taken in ({"status": "completed"}, {"status": "init"}, {}):
        assert httpx.post(server + "/judge", json=[{**state, **taken}]).status_code == 200, taken


def test_serving_an_llm_verifier(fake_grader: tuple[FakeOpenAI, str], make_state: Callable[..., Any]) -> None:
    fake, url = fake_grader
    app = create_app(CompassVerifierV2Config(hosts=[url]))
    with serve_asgi(app) as srv:
        extra = {"question": "How many legs has a cat?"}
        right = httpx.post(
            srv.url + "/reward", json={"response": "\\boxed{4}", "label": "4", "extra_info": extra}
        )
        wrong = httpx.post(
            srv.url + "/reward", json={"response": "\\boxed{3}", "label": "4", "extra_info": extra}
        )
        assert right.json()["verdict"] == "correct" and wrong.json()["verdict"] == "incorrect"
        metrics = httpx.get(srv.url + "/metrics").text
    assert "How many legs has a cat?" in fake.requests[0]["messages"][-1]["content"]
    assert _metric(metrics, 'judger_verdicts_total{judger="compass_verifier_v2",verdict="correct"}') == 1
    assert _metric(metrics, 'judger_verdicts_total{judger="compass_verifier_v2",verdict="incorrect"}') == 1


def test_an_unroutable_data_source_is_the_clients_error() -> None:
    # routing errors raise whatever on_error says (XTuner's contract); over HTTP that is a 422
    # naming the data_source, never a 500 and never a 200 with a failed or null reward
    config = ComposedJudgerConfig(branches={"exact": JudgerConfig(judger_name="exact", reward_handler=exact)})
    with serve_asgi(create_app(config), timeout_graceful_shutdown=2) as srv:
        good = {"response": "1", "reward_model": {"ground_truth": "1"}, "data_source": "exact"}
        assert httpx.post(srv.url + "/judge", json=good).json()["reward"]["score"] == 1.0
        reply = httpx.post(srv.url + "/judge", json={**good, "data_source": "nope"})
        assert reply.status_code == 422
        assert "'nope'" in reply.json()["detail"] and "exact" in reply.json()["detail"]
