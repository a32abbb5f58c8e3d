"""The data path (RolloutController -> samples -> prepare_train_data) against a hostile server on
127.0.0.1 (judger.testing.hostile_openai): every attack ends at its cap or its deadline (the error
says which; the time taken is only guarded, at GUARD times the normal time), memory stays bounded,
nothing it sends reaches training data, and healthy servers keep serving."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judger.core.rollout import RolloutState, Status
from judger.testing.fake_openai import PolicyServer
from judger.testing.hostile_openai import HostileServer, PeakRSS
from judger.trainer.controller import RolloutController, RolloutControllerConfig
from judger.trainer.replay_buffer import ReplayBuffer, ReplayBufferConfig, read_sink
from judger.trainer.training import prepare_train_data

POLICY = "/models/fake-policy"
MiB = 2**20
CAP = MiB  # a lowered max_reply_bytes, so the attacks are cheap to run
RSS_BOUND = 300 * MiB
# a hang guard's bound: GUARD times the time an attack normally takes (its deadline, and a little),
# so a busy machine never trips it while a hang still does
GUARD = 5


@pytest.fixture
def hostile() -> Iterator[HostileServer]:
    server = HostileServer(model=POLICY, drip_interval=0.2).start()
    yield server
    server.stop()


def group(n: int) -> list[RolloutState]:
    return [
        RolloutState(message=[{"role": "user", "content": "what is 6 * 7?"}], group_id="g", rollout_id=i)
        for i in range(n)
    ]


def controller(*urls: str, **kw: Any) -> RolloutController:
    options: dict[str, Any] = {
        "backoff_base": 0.01,
        "probe_interval": 0.1,
        "max_reply_bytes": CAP,
        "request_timeout": 1.0,
        "deadline": 3.0,
        "max_retries": 2,
        "models_timeout": 1.0,
        **kw,
    }
    return RolloutControllerConfig(base_urls=list(urls), **options).build()


async def generate(
    ctl: RolloutController, n: int = 2, limit: float = 60.0
) -> tuple[list[RolloutState], float]:
    """One group; the outer wait only keeps the old code from hanging the suite."""
    start = time.monotonic()
    async with ctl:
        states = await asyncio.wait_for(ctl.generate_group(group(n)), limit)
    return states, time.monotonic() - start


def assert_failed(states: list[RolloutState], *words: str) -> None:
    for state in states:
        assert state.status == Status.FAILED, (state.status, state.response and state.response[:80])
        assert "generation_failure" in state.extra_fields
        for word in words:
            assert word in (state.error_msg or ""), state.error_msg
    data = prepare_train_data([states])
    assert data.samples == [] and data.skipped == {"failed": 1}


# --- replies too big or too slow --------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "words"), [("gzip_bomb", "cap"), ("endless", "cap"), ("huge", "cap")])
async def test_oversized_replies_fail_at_the_cap(hostile: HostileServer, mode: str, words: str) -> None:
    hostile.mode = mode
    hostile.bomb_bytes = 48 * MiB
    # each attempt normally ends at the cap in 0.5 s: timeouts GUARD times that, so that on a
    # busy machine an attempt still ends at the cap and not at its timeout (1 s was too close)
    ctl = controller(hostile.url, model=POLICY, request_timeout=GUARD * 0.5, deadline=GUARD * 1.5)
    with PeakRSS() as rss:
        states, took = await generate(ctl)
    assert_failed(states, words)
    assert took < GUARD * 3.0  # normally: three attempts, each ended at the cap (1.5 s in all)
    assert rss.growth < RSS_BOUND
    assert hostile.requests["/v1/chat/completions"] == 3  # tried, and retried, each ended at the cap


async def test_a_dripping_reply_ends_at_its_total_deadline(hostile: HostileServer) -> None:
    hostile.mode = "drip_chat"
    ctl = controller(hostile.url, model=POLICY, max_retries=0)
    states, took = await generate(ctl)
    assert_failed(states, "no whole reply within 1 s")
    assert took < GUARD * 1.0


async def test_a_dripping_model_list_is_bounded_and_the_healthy_server_answers(
    hostile: HostileServer, policy: PolicyServer
) -> None:
    hostile.mode = "drip_models"
    alone = controller(hostile.url)
    states, took = await generate(alone)
    assert_failed(states, "did not answer within 1 s")
    assert took < GUARD * 1.0
    with_healthy = controller(hostile.url, policy.url)
    states, took = await generate(with_healthy)
    assert [s.status for s in states] == [Status.COMPLETED] * 2
    assert took < GUARD * 1.0


async def test_a_stalled_probe_does_not_keep_a_healthy_server_out(
    hostile: HostileServer, policy: PolicyServer
) -> None:
    hostile.mode = "drip_models"
    # kept out, the requests would fail at their deadline (30 s); normally they take the stalled
    # probe's 1 s and a little
    ctl = controller(hostile.url, policy.url, model=POLICY, deadline=30.0, models_timeout=1.0)
    for server in ctl.servers:  # both taken out: only a probe brings one back
        server.healthy = False
    states, took = await generate(ctl, n=4)
    assert [s.status for s in states] == [Status.COMPLETED] * 4
    assert took < GUARD * 1.5
    assert ctl.servers[1].healthy and not ctl.servers[0].healthy


@pytest.mark.parametrize("mode", ["gzip_bomb", "endless", "huge", "drip_chat"])
async def test_the_healthy_server_keeps_serving(
    hostile: HostileServer, policy: PolicyServer, mode: str
) -> None:
    hostile.mode = mode
    # normally 1-2 s in all; a sample's deadline GUARD times that, so a busy machine does not fail
    # a sample the healthy server would have answered
    ctl = controller(hostile.url, policy.url, model=POLICY, max_retries=3, deadline=GUARD * 2.0)
    with PeakRSS() as rss:
        start = time.monotonic()
        async with ctl:
            groups = await asyncio.wait_for(
                asyncio.gather(*(ctl.generate_group(group(2)) for _ in range(6))), 60
            )
        took = time.monotonic() - start
    assert all(s.status == Status.COMPLETED for g in groups for s in g), [
        s.error_msg for g in groups for s in g if s.status != Status.COMPLETED
    ]
    assert took < GUARD * 2.0 + 1.0
    assert rss.growth < RSS_BOUND
    assert ctl.servers[1].requests >= 6


# --- what reaches training data -------------------------------------------------------------------

BAD_IDS = [-7, "garbage", None, [1, 2], 3.5, True, 1e30, 2**63 + 5, 2**31 + 1]


@pytest.mark.parametrize("bad", BAD_IDS, ids=repr)
async def test_garbage_token_ids_fail_the_sample(hostile: HostileServer, bad: Any) -> None:
    hostile.mode = "bad_ids"
    hostile.bad_value = bad
    states, _ = await generate(controller(hostile.url, model=POLICY))
    assert_failed(states, "invalid generation: response_ids")
    assert all(s.response_ids is None for s in states)


async def test_ids_beyond_the_vocabulary_fail_the_sample(hostile: HostileServer) -> None:
    hostile.mode = "bad_ids"
    hostile.bad_value = 151_700
    states, _ = await generate(controller(hostile.url, model=POLICY, vocab_size=151_643))
    assert_failed(states, "not below the vocabulary size 151643")


@pytest.mark.parametrize("bad", ["x", -1, 1.5], ids=repr)
async def test_garbage_prompt_ids_fail_the_sample(hostile: HostileServer, bad: Any) -> None:
    hostile.mode = "bad_prompt_ids"
    hostile.bad_value = bad
    states, _ = await generate(controller(hostile.url, model=POLICY))
    assert_failed(states, "prompt_ids")
    assert all(s.prompt_ids is None for s in states)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 0.5, "x", None], ids=repr)
async def test_bad_logprobs_fail_the_sample(hostile: HostileServer, bad: Any) -> None:
    hostile.mode = "bad_logprobs"
    hostile.bad_value = bad
    states, _ = await generate(controller(hostile.url, model=POLICY))
    assert_failed(states, "logprobs")
    assert all(s.logprobs is None for s in states)


@pytest.mark.parametrize(("text", "word"), [("x \ud800 y", "UTF-8"), ("x\x00y", "NUL")])
async def test_unwritable_text_fails_the_sample_and_the_sink_still_writes(
    hostile: HostileServer, tmp_path: Path, text: str, word: str
) -> None:
    hostile.content = text
    states, _ = await generate(controller(hostile.url, model=POLICY))
    assert_failed(states, word)
    sink = tmp_path / "buffer.jsonl"
    buffer = ReplayBuffer(ReplayBufferConfig(sink=sink))
    assert buffer.add(states) is False
    buffer.close()
    ((reason, written),) = list(read_sink(sink))
    assert reason == "failed" and written[0].status == Status.FAILED
    assert written[0].response is not None and written[0].response.startswith("x")  # kept, printable


@pytest.mark.parametrize("finish", ["weird", None])
async def test_an_unknown_finish_reason_counts_as_a_generation_failure(
    hostile: HostileServer, finish: str | None
) -> None:
    hostile.mode = "finish_reason"
    hostile.finish_reason = finish
    states, _ = await generate(controller(hostile.url, model=POLICY))
    assert_failed(states, f"finish_reason={finish!r}")


@pytest.mark.parametrize(
    ("mode", "words"),
    [
        ("content_list", "text is a list"),
        ("redirect", "HTTP 302"),
        ("dup_index", "indexes [0, 0] are not 0..1"),
    ],
)
async def test_malformed_replies_fail_the_sample(hostile: HostileServer, mode: str, words: str) -> None:
    hostile.mode = mode
    states, _ = await generate(controller(hostile.url, model=POLICY))
    assert_failed(states, words)
    assert hostile.requests.get("/elsewhere", 0) == 0  # a redirect is never followed


async def test_a_well_formed_reply_still_trains(hostile: HostileServer) -> None:
    states, _ = await generate(controller(hostile.url, model=POLICY, vocab_size=50_000))
    assert [s.status for s in states] == [Status.COMPLETED] * 2
    for s in states:
        s.reward = {"score": 1.0}
    data = prepare_train_data([states])
    assert len(data.samples) == 2 and data.samples[0].labels[-1] == ord("}")


@pytest.mark.parametrize(
    ("mode", "bad"), [("bad_ids", "7"), ("bad_ids", True), ("bad_ids", 3.5), ("bad_logprobs", 0.5)]
)
async def test_the_completions_endpoint_is_checked_the_same(
    hostile: HostileServer, mode: str, bad: Any
) -> None:
    hostile.mode = mode
    hostile.bad_value = bad
    states, _ = await generate(controller(hostile.url, model=POLICY, endpoint="completions"))
    assert_failed(states, "invalid generation")


@pytest.mark.parametrize(
    ("mode", "bad", "words"),
    [
        ("bad_ids", "7", "response_ids holds '7'"),
        ("bad_ids", True, "response_ids holds True"),
        ("bad_ids", 3.5, "response_ids holds 3.5"),
        ("bad_logprobs", math.nan, "non-finite"),
        ("finish_reason", "weird", "finish_reason='weird'"),
        ("gzip_bomb", None, "cap"),
    ],
)
async def test_the_agent_loops_url_generator_fails_what_it_cannot_train_on(
    hostile: HostileServer, mode: str, bad: Any, words: str
) -> None:
    from judger.trainer.agent_loop import SingleTurnAgentLoop, SingleTurnAgentLoopConfig, render_messages

    hostile.mode = mode
    hostile.bad_value = bad
    hostile.finish_reason = bad
    hostile.bomb_bytes = 96 * MiB  # over HttpClient's default cap of 64 MiB
    loop = SingleTurnAgentLoop(
        SingleTurnAgentLoopConfig(model=POLICY, group_size=2, request_timeout=10.0),
        hostile.url,
        render_prompt=render_messages,
    )
    try:
        states = await asyncio.wait_for(loop.generate_group(group(1)[0]), 15)
    finally:
        await loop.aclose()
    assert_failed(states, words)
