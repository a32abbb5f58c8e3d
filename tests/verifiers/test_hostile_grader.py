"""CompassVerifierV2 against a hostile grader on 127.0.0.1 (judger.testing.hostile_openai): every
attack ends at its cap or its deadline in bounded memory (the time taken only guarded, at GUARD times
the normal time), a reply we cannot trust fails the sample (it is never scored), and a healthy
grader keeps grading."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from judger import CompassVerifierV2Config, RolloutState, Status
from judger.testing.fake_openai import FakeOpenAI
from judger.testing.hostile_openai import HostileServer, PeakRSS

MiB = 2**20
# a hang guard's bound: GUARD times the time an attack normally takes (its deadlines, and a little),
# so a busy machine never trips it while a hang (the judger's own timeout is 30 s) still does
GUARD = 5


@pytest.fixture
def hostile() -> Iterator[HostileServer]:
    server = HostileServer(model="fake-grader", content="\\boxed{A}", drip_interval=0.2).start()
    yield server
    server.stop()


def config(*hosts: str, **kw: Any) -> CompassVerifierV2Config:
    options: dict[str, Any] = {
        "retry_backoff": 0.01,
        "max_reply_bytes": MiB,
        "request_timeout": 1.0,
        "max_retries": 1,
        "timeout": 30.0,
        **kw,
    }
    return CompassVerifierV2Config(hosts=list(hosts), **options)


async def judge(cfg: CompassVerifierV2Config, state: RolloutState) -> tuple[RolloutState, float]:
    start = time.monotonic()
    async with cfg.build() as judger:
        state = await judger.judge(state)
    return state, time.monotonic() - start


def assert_not_scored(state: RolloutState, *words: str) -> None:
    assert state.status is Status.FAILED and state.reward is None, state.reward
    for word in words:
        assert word in (state.error_msg or ""), state.error_msg


@pytest.mark.parametrize("mode", ["gzip_bomb", "endless", "huge", "drip_chat"])
async def test_oversized_or_dripping_replies_fail_in_bounded_time_and_memory(
    hostile: HostileServer, make_state: Callable[..., RolloutState], mode: str
) -> None:
    hostile.mode = mode
    hostile.bomb_bytes = 48 * MiB
    with PeakRSS() as rss:
        state, took = await judge(config(hostile.url, model="fake-grader"), make_state("\\boxed{5}", "5"))
    assert_not_scored(state)
    assert took < GUARD * 2 * 1.0  # normally: two attempts, each ended at the cap or its 1 s deadline
    assert rss.growth < 300 * MiB


@pytest.mark.parametrize("mode", ["gzip_bomb", "endless", "huge", "drip_chat"])
async def test_a_healthy_grader_keeps_grading(
    hostile: HostileServer,
    fake_grader: tuple[FakeOpenAI, str],
    make_state: Callable[..., RolloutState],
    mode: str,
) -> None:
    hostile.mode = mode
    hostile.bomb_bytes = 48 * MiB
    cfg = config(hostile.url, fake_grader[1], model="fake-grader", max_retries=3)
    start = time.monotonic()
    async with cfg.build() as judger:
        states = await judger.batch_judge([make_state(f"\\boxed{{{i}}}", "1") for i in range(6)])
    assert [s.reward and s.reward["acc"] for s in states] == [i == 1 for i in range(6)]
    assert time.monotonic() - start < 4 * (1.0 + 1.0)


async def test_a_dripping_model_list_is_bounded(
    hostile: HostileServer, make_state: Callable[..., RolloutState]
) -> None:
    hostile.mode = "drip_models"
    state, took = await judge(config(hostile.url, max_retries=0), make_state("\\boxed{5}", "5"))
    assert_not_scored(state, "timeout after 1 s")
    assert took < GUARD * 1.0


@pytest.mark.parametrize(
    "reply",
    [
        "Final Judgment: a wrong answer, so B",
        "\\boxed{B} on reflection \\boxed{A}",
        "<think>it matches, \\boxed{A}",
        "<Predicted Answer Begin>: \\boxed{5} Final Judgment: A",
    ],
)
async def test_a_reply_without_a_trustworthy_verdict_is_not_scored(
    hostile: HostileServer, make_state: Callable[..., RolloutState], reply: str
) -> None:
    hostile.content = reply
    state, _ = await judge(config(hostile.url, model="fake-grader"), make_state("\\boxed{5}", "5"))
    assert_not_scored(state, "VerdictParseError")


@pytest.mark.parametrize(("mode", "words"), [("redirect", "HTTP 302"), ("content_list", "not text")])
async def test_malformed_grader_replies_are_not_scored(
    hostile: HostileServer, make_state: Callable[..., RolloutState], mode: str, words: str
) -> None:
    hostile.mode = mode
    state, _ = await judge(config(hostile.url, model="fake-grader"), make_state("\\boxed{5}", "5"))
    assert_not_scored(state, words)
    assert hostile.requests.get("/elsewhere", 0) == 0
