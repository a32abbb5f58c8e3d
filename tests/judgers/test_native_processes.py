"""NativeJudger(execution="process"): user handlers on killable worker processes."""

from __future__ import annotations

import os
import sys
import time
import types
from typing import Any

import pytest

from judger import JudgerConfig, NativeJudger, RolloutState, Status
from judger.testing.handlers import exact_match

pytestmark = pytest.mark.py310


def state(response: str, sleep: float = 0.0) -> RolloutState:
    return RolloutState(
        response=response, reward_model={"ground_truth": "1"}, extra_fields={"extra_info": {"sleep": sleep}}
    )


async def test_results_equal_thread_execution() -> None:
    states = [state(str(i % 3)) for i in range(30)]
    cfg = JudgerConfig(
        judger_name="p", reward_handler="judger.testing.handlers:exact_match", execution="process"
    )
    out = await cfg.build().batch_judge(states)
    expected = [exact_match(str(i % 3), "1", {}) for i in range(30)]
    assert [s.reward for s in out] == expected


async def test_handler_runs_in_another_process() -> None:
    judger = NativeJudger(reward_handler="judger.testing.handlers:report_pid", execution="process")
    s = await judger.judge(state("1"))
    assert s.reward["pid"] != os.getpid()


def _local_reward(response: str, label: Any, extra_info: dict) -> dict:
    return {"score": 1.0}


# pickled by reference to a module that exists only in this process, so no worker can import it
# however pytest was started (`python -m pytest` puts the checkout, and so this module, on sys.path)
_PARENT_ONLY = types.ModuleType("judger_tests_parent_only")
_PARENT_ONLY._local_reward = _local_reward  # type: ignore[attr-defined]
_local_reward.__module__ = _PARENT_ONLY.__name__
sys.modules[_PARENT_ONLY.__name__] = _PARENT_ONLY


def test_a_handler_workers_cannot_import_is_refused_at_build() -> None:
    with pytest.raises(ValueError, match="'judger_tests_parent_only' cannot be imported by a worker"):
        NativeJudger(reward_handler=_local_reward, execution="process")
    # left to judger, it runs on threads (tests/judgers/test_native_execution.py)
    assert NativeJudger(reward_handler=_local_reward).execution == "thread"


async def test_a_stuck_handler_is_killed_at_the_deadline_and_the_rest_complete() -> None:
    judger = NativeJudger(reward_handler="judger.testing.handlers:sleepy", execution="process", timeout=1.0)
    start = time.monotonic()
    out = await judger.batch_judge([state("1"), state("1", sleep=60), state("0")])
    assert time.monotonic() - start < 15
    assert out[0].reward["score"] == 1.0 and out[2].reward["score"] == 0.0
    assert out[1].status is Status.FAILED and out[1].extra_fields["judge_failure"]["kind"] == "timeout"


async def test_a_crashing_handler_fails_only_its_sample() -> None:
    judger = NativeJudger(reward_handler="judger.testing.handlers:crashing", execution="process")
    out = await judger.batch_judge([state("1"), state("crash"), state("1")])
    assert [s.status for s in out] == [Status.INIT, Status.FAILED, Status.INIT]
    assert "WorkerCrashedError" in out[1].error_msg


def test_process_execution_needs_a_sync_handler() -> None:
    async def reward(response: str, label: Any, extra_info: dict) -> dict:
        return {"score": 1.0}

    with pytest.raises(ValueError, match="execution='process'"):
        NativeJudger(reward_handler=reward, execution="process")
