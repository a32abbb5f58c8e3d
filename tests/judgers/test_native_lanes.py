"""Sync handlers on worker-thread lanes: every sample scored once, deadlines per sample, hung calls
abandoned without stranding or losing their neighbours, cancellation stops the lanes."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from judger import NativeJudger, RolloutState, Status

pytestmark = pytest.mark.py310


def state(response: str) -> RolloutState:
    return RolloutState(response=response, reward_model={"ground_truth": "1"})


async def test_each_sample_is_scored_exactly_once_across_lanes() -> None:
    calls: list[str] = []
    lock = threading.Lock()
    threads: set[int] = set()
    another_lane_ran = threading.Event()

    def reward(response: str, label: Any, extra_info: dict) -> dict:
        with lock:
            calls.append(response)
            threads.add(threading.get_ident())
            if len(threads) > 1:
                another_lane_ran.set()
        if response == "0":
            # the first sample's lane waits for another lane to score: a trivial handler would let
            # one lane finish the batch before a busy machine starts the others
            another_lane_ran.wait(10)
        return {"score": float(response), "thread": threading.get_ident()}

    judger = NativeJudger(reward_handler=reward, num_threads=4)
    out = await judger.batch_judge([state(str(i)) for i in range(3000)])
    assert sorted(calls, key=int) == [str(i) for i in range(3000)]
    assert [s.reward["score"] for s in out] == [float(i) for i in range(3000)]
    assert len({s.reward["thread"] for s in out}) > 1  # the lanes shared the batch
    await judger.aclose()


async def test_several_hung_samples_fail_alone_and_fresh_lanes_take_the_rest() -> None:
    release = threading.Event()

    def reward(response: str, label: Any, extra_info: dict) -> dict:
        if response == "hang":
            release.wait(10)
        return {"score": 1.0}

    hung = {5, 6, 40, 41, 42}  # more hung samples than threads: every lane gets stuck in turn
    states = [state("hang" if i in hung else "1") for i in range(80)]
    judger = NativeJudger(reward_handler=reward, timeout=0.3, num_threads=2)
    try:
        started = time.monotonic()
        out = await judger.batch_judge(states)
        elapsed = time.monotonic() - started
        assert [i for i, s in enumerate(out) if s.status is Status.FAILED] == sorted(hung)
        assert all("within 0.3 s" in out[i].error_msg for i in hung)
        assert all(s.reward == {"score": 1.0} for i, s in enumerate(out) if i not in hung)
        # each hang costs one deadline on its own lane, never the sum of them in turn
        assert elapsed < 5 * 0.3 + 1.0
    finally:
        release.set()
        await judger.aclose()


async def test_samples_finishing_around_their_deadline_are_never_lost() -> None:
    # calls that end just before, at, or just after the deadline race the watcher abandoning their
    # lane: each sample must still end with its reward or a timeout, never with nothing
    durations = [0.0, 0.045, 0.05, 0.055, 0.2]

    def reward(response: str, label: Any, extra_info: dict) -> dict:
        time.sleep(durations[int(response) % len(durations)])
        return {"score": 1.0}

    judger = NativeJudger(reward_handler=reward, timeout=0.05, num_threads=3)
    try:
        out = await judger.batch_judge([state(str(i)) for i in range(60)])
        for i, s in enumerate(out):
            if s.status is Status.FAILED:
                assert "within 0.05 s" in s.error_msg and s.reward is None
            else:
                assert s.reward == {"score": 1.0}
            if durations[i % len(durations)] == 0.2:
                assert s.status is Status.FAILED  # overran by four deadlines: always failed
    finally:
        await judger.aclose()


async def test_a_cancelled_batch_stops_its_lanes() -> None:
    calls = 0

    def reward(response: str, label: Any, extra_info: dict) -> dict:
        nonlocal calls
        calls += 1
        time.sleep(0.01)
        return {"score": 1.0}

    judger = NativeJudger(reward_handler=reward, num_threads=2)
    with pytest.raises(asyncio.TimeoutError):  # wait_for cancels the batch at its timeout
        await asyncio.wait_for(judger.batch_judge([state("1") for _ in range(1000)]), 0.1)
    await asyncio.sleep(0.3)  # the lanes finish the 10 ms call they are in, even on a busy machine
    stopped_at = calls
    await asyncio.sleep(0.3)
    assert calls == stopped_at < 1000  # no lane took another sample after the cancellation
    await judger.aclose()


async def test_a_batch_cancelled_while_its_lane_queues_scores_nothing() -> None:
    busy = threading.Event()
    scored: list[str] = []

    def reward(response: str, label: Any, extra_info: dict) -> dict:
        if response == "hold":
            busy.set()
            time.sleep(0.5)  # holds the only thread while the second batch queues behind it
        scored.append(response)
        return {"score": 1.0}

    judger = NativeJudger(reward_handler=reward, num_threads=1, timeout=10)
    holding = asyncio.ensure_future(judger.batch_judge([state("hold")]))
    while not busy.is_set():
        await asyncio.sleep(0.01)
    with pytest.raises(asyncio.TimeoutError):  # cancelled while its lane waits for the thread
        await asyncio.wait_for(judger.batch_judge([state("queued") for _ in range(5)]), 0.1)
    await holding
    await asyncio.sleep(0.3)  # time for a queued lane to run, had it not been stopped
    assert scored == ["hold"]
    await judger.aclose()
