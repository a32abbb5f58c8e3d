"""RolloutController against real fake servers on 127.0.0.1: requests, balancing, failures, recovery."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from judger.core.rollout import RolloutState, Status
from judger.testing.fake_openai import PolicyServer
from judger.trainer.controller import RolloutController, RolloutControllerConfig
from judger.trainer.sample_params import SampleParams
from judger.trainer.training import prepare_train_data

POLICY = "/models/fake-policy"


def group(n: int, text: str = "what is 6 * 7 = 42?", gid: str = "g") -> list[RolloutState]:
    return [
        RolloutState(
            message=[{"role": "user", "content": text}], reward_model={"ground_truth": "42"}, group_id=gid
        )
        for _ in range(n)
    ]


def controller(*served: PolicyServer, **kw: Any) -> RolloutController:
    kw.setdefault("backoff_base", 0.01)
    kw.setdefault("probe_interval", 0.1)
    return RolloutControllerConfig(base_urls=[s.url for s in served], **kw).build()


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
async def test_group_in_one_request_with_ids_logprobs_and_params(policy: PolicyServer, endpoint: str) -> None:
    policy.fake.responder = lambda prompt, j: f"sample {j}: #### 42"
    async with controller(policy, endpoint=endpoint) as ctl:
        params = SampleParams(temperature=0.7, top_p=0.9, max_tokens=64, stop=["\n\n"], seed=3, top_k=20)
        states = await ctl.generate_group(group(4), params)
    assert policy.fake.models_requests == 1  # the model name came from /v1/models, once
    (body,) = list(policy.fake.requests)
    assert body["model"] == POLICY and body["n"] == 4
    assert {k: body[k] for k in ("temperature", "top_p", "max_tokens", "stop", "seed", "top_k")} == {
        "temperature": 0.7,
        "top_p": 0.9,
        "max_tokens": 64,
        "stop": ["\n\n"],
        "seed": 3,
        "top_k": 20,
    }
    assert [s.response for s in states] == [f"sample {j}: #### 42" for j in range(4)]
    for s in states:
        assert s.status == Status.COMPLETED and s.finish_reason == "stop"
        assert s.response_ids == [ord(c) for c in s.response]
        assert s.logprobs == [-0.01] * len(s.response)
        assert s.prompt_ids == [ord(c) for c in "what is 6 * 7 = 42?"]
    for s in states:
        s.reward = {"score": float(s.response.startswith("sample 0"))}
    assert len(prepare_train_data([states]).samples) == 4


async def test_ids_from_token_id_strings_when_the_server_sends_no_token_ids(policy: PolicyServer) -> None:
    """vLLM before return_token_ids: only logprob tokens written "token_id:N"."""
    async with controller(policy, return_token_ids=False) as ctl:
        (state,) = await ctl.generate_group(group(1), {"extra_body": {"return_tokens_as_token_ids": True}})
    assert "return_token_ids" not in policy.fake.requests[-1]
    assert state.response_ids == [ord(c) for c in state.response] and state.prompt_ids is None


async def test_sample_params_n_splits_a_group_into_requests(policy: PolicyServer) -> None:
    async with controller(policy) as ctl:
        states = await ctl.generate_group(group(5), {"n": 2})
    assert [b["n"] for b in policy.fake.requests] == [2, 2, 1]
    assert all(s.status == Status.COMPLETED for s in states)


async def test_finish_reasons_map_to_status(policy: PolicyServer) -> None:
    async with controller(policy) as ctl:
        (cut,) = await ctl.generate_group(group(1), {"max_tokens": 4})
        policy.fake.finish_reason = "abort"
        (aborted,) = await ctl.generate_group(group(1))
        policy.fake.finish_reason = "error"
        (errored,) = await ctl.generate_group(group(1))
    assert cut.status == Status.COMPLETED and cut.finish_reason == "length" and cut.response == "The "
    assert cut.extra_fields["truncated"] is True
    assert aborted.status == Status.ABORTED
    assert errored.status == Status.FAILED and "finish_reason='error'" in errored.error_msg


@pytest.mark.parametrize("fault", ["429", "500", "503", "drop"])
async def test_transient_failures_are_retried(policy: PolicyServer, fault: str) -> None:
    if fault == "drop":
        policy.fake.drop_first = 2
    else:
        policy.fake.fail_first, policy.fake.fail_status = 2, int(fault)
    async with controller(policy, max_consecutive_failures=10) as ctl:
        states = await ctl.generate_group(group(3))
        assert ctl.stats.retries == 2
    assert policy.fake.chat_requests == 3
    assert all(s.status == Status.COMPLETED and s.response.endswith("{42}") for s in states)


async def test_client_errors_fail_at_once_with_the_reason(policy: PolicyServer) -> None:
    cfg = RolloutControllerConfig(base_urls=[policy.url], model="not-served", backoff_base=0.01)
    async with cfg.build() as ctl:
        ctl._model_checked = True  # skip the /v1/models check: the server's own 404 must surface
        states = await ctl.generate_group(group(2))
    assert policy.fake.chat_requests == 1
    assert all(s.status == Status.FAILED and "HTTP 404" in s.error_msg for s in states)


async def test_wrong_model_name_is_refused_naming_the_setting(policy: PolicyServer) -> None:
    cfg = RolloutControllerConfig(base_urls=[policy.url], model="not-served")
    async with cfg.build() as ctl:
        states = await ctl.generate_group(group(1))
    assert states[0].status == Status.FAILED and "RolloutControllerConfig.model" in states[0].error_msg
    assert policy.fake.chat_requests == 0


async def test_deadline_bounds_a_stalled_request(policy: PolicyServer) -> None:
    policy.fake.mode = "stall"
    start = time.monotonic()
    async with controller(policy, request_timeout=0.3, deadline=1.0, max_consecutive_failures=100) as ctl:
        states = await ctl.generate_group(group(2))
    assert time.monotonic() - start < 5.0
    assert all(s.status == Status.FAILED for s in states)
    assert "deadline of 1 s passed" in states[0].error_msg and "no whole reply within" in states[0].error_msg


async def test_least_outstanding_balancing_and_bounded_concurrency(two_policies: list[PolicyServer]) -> None:
    a, b = two_policies
    a.fake.delay = 0.25  # a is slow: it holds its requests longer, so b should get more of them
    b.fake.delay = 0.01
    async with controller(a, b, max_concurrency=8) as ctl:
        groups = [group(2, gid=str(i)) for i in range(60)]
        await asyncio.gather(*(ctl.generate_group(g) for g in groups))
    assert all(s.status == Status.COMPLETED for g in groups for s in g)
    served = a.fake.chat_requests, b.fake.chat_requests
    assert sum(served) == 60 and served[1] > 1.5 * served[0] > 0, served
    assert a.fake.max_in_flight + b.fake.max_in_flight <= 8 + 1  # 8 in flight; +1: counters are racy


async def test_server_killed_halfway_is_taken_out_and_probed_back(two_policies: list[PolicyServer]) -> None:
    a, b = two_policies
    for s in two_policies:
        s.fake.delay = 0.02
    async with controller(a, b, max_concurrency=16, request_timeout=5.0) as ctl:
        groups = [group(2, gid=str(i)) for i in range(120)]

        def kill_halfway() -> None:
            deadline = time.monotonic() + 60
            while a.fake.chat_requests + b.fake.chat_requests < 60 and time.monotonic() < deadline:
                time.sleep(0.005)
            a.kill()

        killer = threading.Thread(target=kill_halfway, daemon=True)
        killer.start()
        await asyncio.gather(*(ctl.generate_group(g) for g in groups))
        killer.join()
        assert all(s.status == Status.COMPLETED for g in groups for s in g)
        (sa, sb) = ctl.servers
        assert not sa.healthy and sa.taken_out == 1 and sb.healthy
        assert a.fake.chat_requests > 0 and b.fake.chat_requests > a.fake.chat_requests

        # the same address comes back (a restarted server): the probe puts it back in rotation
        back = PolicyServer(POLICY, port=a.server.port)
        try:
            for _ in range(400):  # the probe runs every 0.1 s; the margin is for a loaded machine
                if sa.healthy:
                    break
                await asyncio.sleep(0.05)
            assert sa.healthy
            await asyncio.gather(*(ctl.generate_group(group(1, gid=f"r{i}")) for i in range(20)))
            assert back.fake.chat_requests > 0
        finally:
            back.stop()


async def test_all_servers_down_fails_within_the_deadline(policy: PolicyServer) -> None:
    policy.server.stop()
    cfg = RolloutControllerConfig(
        base_urls=[policy.url], model=POLICY, deadline=0.8, probe_interval=0.1, backoff_base=0.01
    )
    start = time.monotonic()
    async with cfg.build() as ctl:
        states = await ctl.generate_group(group(2))
    assert time.monotonic() - start < 5.0
    assert all(s.status == Status.FAILED for s in states)
    assert "generation failed" in states[0].error_msg


def test_config_errors_name_the_field() -> None:
    with pytest.raises(ValueError, match="base_urls"):
        RolloutControllerConfig(base_urls=["127.0.0.1:8000"])
    with pytest.raises(ValueError, match="temprature"):
        SampleParams.model_validate({"temprature": 0.5})
    assert RolloutControllerConfig(base_urls=["http://h:1/v1/"]).base_urls == ["http://h:1"]
    assert SampleParams.model_validate({"stops": ["x"], "do_sample": False}).to_body() == {
        "stop": ["x"],
        "temperature": 0.0,
    }


async def test_pause_aborts_a_group_in_flight_on_the_controller(policy: PolicyServer) -> None:
    from judger.presets import GSM8KJudgerConfig
    from judger.trainer.agent_loop import SingleTurnAgentLoop, SingleTurnAgentLoopConfig

    policy.fake.mode = "stall"
    async with controller(policy) as ctl:
        loop = SingleTurnAgentLoop(
            SingleTurnAgentLoopConfig(pause_grace_s=0.1), ctl, GSM8KJudgerConfig().build()
        )
        task = asyncio.ensure_future(loop.generate_group(group(3)))
        await asyncio.sleep(0.3)
        loop.pause()
        states = await asyncio.wait_for(task, 5.0)
    assert all(s.status == Status.ABORTED and s.finish_reason == "abort" and s.reward is None for s in states)
    assert prepare_train_data([states]).skipped == {"aborted": 1}


async def test_requests_waiting_for_servers_spread_over_all_that_come_back(
    two_policies: list[PolicyServer], caplog: pytest.LogCaptureFixture
) -> None:
    a, b = two_policies
    for s in two_policies:
        s.fake.mode = "drop"  # replies and probes cut: both servers out, and they stay out
    # probe rounds 1 s apart, so that the servers come back between two rounds, never during one
    cfg: dict[str, Any] = {"max_consecutive_failures": 1, "deadline": 60.0, "max_retries": 3}
    async with controller(a, b, model=POLICY, probe_interval=1.0, **cfg) as ctl:
        with caplog.at_level("WARNING", logger="judger.trainer.controller"):
            work = asyncio.gather(*(ctl.generate_group(group(1, gid=str(i))) for i in range(20)))
            for _ in range(400):
                if not any(s.healthy for s in ctl.servers):
                    break
                await asyncio.sleep(0.02)
            assert not any(s.healthy for s in ctl.servers)
            await asyncio.sleep(0.3)  # every request is now waiting for a server
            # reported as it happens: which servers, and when the waiting ends
            (down,) = [r.getMessage() for r in caplog.records if "every rollout server is out" in r.message]
            assert a.url in down and b.url in down and "deadline of 60 s, the first at" in down
            probed = a.fake.models_requests, b.fake.models_requests
            for _ in range(300):  # a probe round has just gone by (both cut at once)
                if min(a.fake.models_requests - probed[0], b.fake.models_requests - probed[1]) > 0:
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.1)
            b.fake.models_delay = 0.5  # b answers its probe slowly: a is known back first
            for s in two_policies:
                s.fake.reset()
                s.fake.delay = 0.3  # requests stay in flight while the waiting ones are dispatched
                s.fake.mode = "ok"  # both back before the next probe round
            groups = await work
    assert all(s.status == Status.COMPLETED for g in groups for s in g)
    served = a.fake.chat_requests, b.fake.chat_requests
    assert sum(served) == 20 and min(served) >= 5, served
