"""Sync handlers that overrun their deadline keep their thread (a Python thread cannot be killed):
those threads are counted against a fixed budget, samples fail fast past it with a message naming
``execution="process"``, and an abandoned call never delays the interpreter's exit."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from judger import NativeJudger, RolloutState, Status

pytestmark = pytest.mark.py310


def state(response: str) -> RolloutState:
    return RolloutState(response=response, reward_model={"ground_truth": "1"})


def _judger_threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(f"judger-{name}")]


async def test_hung_calls_hold_a_fixed_budget_of_threads_then_fail_fast(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="judger.runtime.threads")
    release = threading.Event()

    def reward(response: str, label: Any, extra_info: dict) -> dict:
        if response == "hang":
            release.wait(30)
        return {"score": 1.0}

    judger = NativeJudger("budget", reward_handler=reward, timeout=0.2, num_threads=2, max_hung_threads=1)
    try:
        for _ in range(8):  # more hung calls than the budget: one new thread per call would be 8
            out = await judger.judge(state("hang"))
            assert out.status is Status.FAILED
        threads = _judger_threads("budget")
        assert len(threads) <= 3 and all(t.daemon for t in threads)
        # each abandoned call is said, with the count and the way out
        warnings = [r.getMessage() for r in caplog.records if "overran its deadline" in r.getMessage()]
        assert len(warnings) == 3 and "(3 hung of at most 3 threads)" in warnings[-1]
        assert all('execution="process"' in w for w in warnings)
        # every thread of the budget is hung: a sample fails at once and says what to do
        started = time.monotonic()
        out = await judger.judge(state("1"))
        assert time.monotonic() - started < 0.1
        assert out.status is Status.FAILED and out.reward is None
        assert "ThreadBudgetError" in out.error_msg and 'execution="process"' in out.error_msg
        # a batch fails fast too, every sample with the reason
        batch = await judger.batch_judge([state("1") for _ in range(5)])
        assert all(s.status is Status.FAILED and "ThreadBudgetError" in s.error_msg for s in batch)
        # the hung calls return: their threads take calls again
        release.set()
        deadline = time.monotonic() + 5
        while judger._thread_pool().hung and time.monotonic() < deadline:
            time.sleep(0.01)
        out = await judger.judge(state("1"))
        assert out.reward == {"score": 1.0}
        assert len(_judger_threads("budget")) <= 3
    finally:
        release.set()
        await judger.aclose()


async def test_a_batch_past_the_budget_fails_its_remaining_samples_fast() -> None:
    release = threading.Event()

    def reward(response: str, label: Any, extra_info: dict) -> dict:
        if response == "hang":
            release.wait(30)
        return {"score": 1.0}

    judger = NativeJudger(
        "batch_budget", reward_handler=reward, timeout=0.2, num_threads=2, max_hung_threads=2
    )
    try:
        started = time.monotonic()
        out = await judger.batch_judge([state("hang") for _ in range(12)])
        elapsed = time.monotonic() - started
        reasons = [s.error_msg or "" for s in out]
        assert all(s.status is Status.FAILED for s in out)
        assert sum("within 0.2 s" in r for r in reasons) == 4  # the four threads of the budget
        assert sum('execution="process"' in r for r in reasons) == 8  # the rest, without waiting
        assert elapsed < 2.0
        assert len(_judger_threads("batch_budget")) <= 4
    finally:
        release.set()
        await judger.aclose()


def test_an_abandoned_call_does_not_delay_exit(tmp_path: Path) -> None:
    script = tmp_path / "hang_then_exit.py"
    script.write_text(
        textwrap.dedent(
            """
            import asyncio, time
            from judger import NativeJudger, RolloutState

            def reward(response, label, extra_info):
                time.sleep(30)  # overruns its deadline and keeps its thread
                return {"score": 1.0}

            async def main():
                judger = NativeJudger(reward_handler=reward, timeout=0.2)
                out = await judger.batch_judge([RolloutState(response="x") for _ in range(3)])
                print(out[0].status.value, flush=True)

            asyncio.run(main())
            """
        )
    )
    started = time.monotonic()
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "failed"
    assert elapsed < 10, f"exit waited {elapsed:.1f} s for the abandoned calls"


async def test_the_default_budget_bounds_threads_of_a_config() -> None:
    from judger import JudgerConfig

    release = threading.Event()

    def reward(response: str, label: Any, extra_info: dict) -> dict:
        release.wait(30)
        return {"score": 1.0}

    judger = JudgerConfig(
        judger_name="default_budget", reward_handler=reward, timeout=0.05, num_threads=1
    ).build()
    try:
        for _ in range(20):
            await judger.judge(state("hang"))
        # one worker and at most 16 hung calls beside it, not one thread per hung call
        assert len(_judger_threads("default_budget")) <= 17
        out = await judger.judge(state("1"))
        assert out.status is Status.FAILED and 'execution="process"' in out.error_msg
    finally:
        release.set()
        await judger.aclose()


async def test_a_hung_batch_handler_is_counted_against_the_budget() -> None:
    from judger import batch_handler

    release = threading.Event()

    @batch_handler
    def reward(responses: list[str], labels: list[Any], extra_infos: list[dict]) -> list[dict]:
        release.wait(30)
        return [{"score": 1.0} for _ in responses]

    judger = NativeJudger(
        "batched_budget", reward_handler=reward, timeout=0.2, num_threads=1, max_hung_threads=0
    )
    try:
        out = await judger.batch_judge([state("1"), state("2")])
        assert all(s.status is Status.FAILED and "within 0.2 s" in s.error_msg for s in out)
        assert judger._thread_pool().hung == 1
        out = await judger.batch_judge([state("1")])  # the only thread hangs: fail at once
        assert 'execution="process"' in out[0].error_msg
    finally:
        release.set()
        await judger.aclose()
