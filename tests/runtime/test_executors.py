"""The execution layer: one executor per place behind one interface, picked by one function from
what a judger declares it needs; each judger runs its calls on the one picked for it."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from judger import NativeJudger
from judger.core.errors import JudgeTimeoutError
from judger.presets.base import ScorerJudger
from judger.runtime.executors.base import Needs
from judger.runtime.executors.coroutine import CoroutineExecutor
from judger.runtime.executors.http import HttpExecutor
from judger.runtime.executors.inline import InlineExecutor
from judger.runtime.executors.pick import Setting, pick_executor
from judger.runtime.executors.process import ProcessExecutor
from judger.runtime.executors.sandbox import SandboxExecutor
from judger.runtime.executors.thread import ThreadExecutor
from judger.testing.handlers import exact_match

pytestmark = pytest.mark.py310


@pytest.mark.parametrize(
    ("needs", "expected"),
    [
        (Needs(kind="url"), HttpExecutor),
        (Needs(kind="async"), CoroutineExecutor),
        (Needs(isolation=True), SandboxExecutor),
        (Needs(on_loop=True), InlineExecutor),
        (Needs(), ProcessExecutor),  # a sync call may hang unless declared safe
        (Needs(may_hang=False), ThreadExecutor),
    ],
)
def test_one_function_picks_the_executor_from_what_is_needed(needs: Needs, expected: type) -> None:
    executor = pick_executor(needs, Setting("picked", sandbox={"max_parallel": 1}))
    assert type(executor) is expected
    assert executor.travels is (expected is ProcessExecutor)  # only a worker process pickles fn


def _halve(x: int) -> float:
    if x < 0:
        raise ValueError(f"negative {x}")
    return x / 2


async def test_inline_results_in_order_with_each_failure_in_its_place() -> None:
    out = await InlineExecutor().run(_halve, [2, -1, 4], deadline=1.0)
    assert out[0] == 1.0 and out[2] == 2.0
    assert isinstance(out[1], ValueError) and "negative -1" in str(out[1])


async def test_thread_lane_overrun_fails_that_call_alone_and_the_rest_are_scored() -> None:
    release = threading.Event()

    def slow_on_one(x: int) -> int:
        if x == 1:
            release.wait(5)  # overruns the deadline; let go at the end so no thread stays hung
        return x * 10

    executor = ThreadExecutor("lanes", num_threads=2, max_hung=1)
    try:
        out = await executor.run(slow_on_one, [0, 1, 2, 3], deadline=0.3)
    finally:
        release.set()
        await executor.aclose()
    assert out[0] == 0 and out[2] == 20 and out[3] == 30
    assert isinstance(out[1], JudgeTimeoutError) and "lanes" in str(out[1])


async def test_coroutine_deadline_per_call_and_raise_errors() -> None:
    async def wait(x: float) -> float:
        await asyncio.sleep(x)
        return x

    out = await CoroutineExecutor("aio", limit=4).run(wait, [0.0, 5.0, 0.01], deadline=0.2)
    assert out[0] == 0.0 and out[2] == 0.01 and isinstance(out[1], JudgeTimeoutError)
    with pytest.raises(JudgeTimeoutError):
        await CoroutineExecutor("aio", limit=4, raise_errors=True).run(wait, [5.0], deadline=0.05)
    with pytest.raises(JudgeTimeoutError, match="batch of 3"):
        await CoroutineExecutor("aio", limit=1).call_batch(wait, 5.0, deadline=0.05, size=3)


async def test_sandbox_executor_runs_at_most_max_parallel_calls_at_once() -> None:
    running = peak = 0

    async def program(x: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.02)
        running -= 1
        return x

    executor = SandboxExecutor("code", max_parallel=2)  # no limits: programs run elsewhere
    started = time.monotonic()
    out = await executor.run(program, list(range(6)), deadline=5.0)
    assert out == list(range(6)) and peak == 2 and time.monotonic() - started < 5


def test_each_judger_runs_on_the_executor_picked_for_what_it_declares() -> None:
    def closure(response: str, label: Any, extra_info: dict[str, Any]) -> dict[str, Any]:
        return {"score": 1.0}

    async def coro(response: str, label: Any, extra_info: dict[str, Any]) -> dict[str, Any]:
        return {"score": 1.0}

    placed = {
        NativeJudger(reward_handler=closure, execution="thread"): ThreadExecutor,
        NativeJudger(reward_handler=exact_match): ProcessExecutor,  # importable: killable by default
        NativeJudger(reward_handler=coro): CoroutineExecutor,
        NativeJudger(reward_handler="http://127.0.0.1:9/score"): HttpExecutor,
        ScorerJudger("inline", exact_match): InlineExecutor,
        ScorerJudger("process", exact_match, execution="process"): ProcessExecutor,
    }
    for judger, expected in placed.items():
        assert type(judger._executor) is expected, judger
