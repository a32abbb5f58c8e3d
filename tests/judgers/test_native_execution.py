"""Where a sync handler runs by default: in a worker process killed at its deadline whenever a
worker can load it, so a call that hangs costs its sample and nothing after it; on threads, said
at build with the reason, when no worker can; on threads without a word when declared safe; and
what cannot be honoured (processes for a handler no worker loads, threads for an async or URL
handler) is refused at build by name."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from judger import JudgerConfig, NativeJudger, RolloutState, Status
from judger.core.errors import JudgeTimeoutError

pytestmark = pytest.mark.py310


def state(response: str, label: str = "1") -> RolloutState:
    return RolloutState(response=response, reward_model={"ground_truth": label})


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rpartition(")")[2].split()[0] == "Z"  # killed, not yet reaped


def _ran_in(folder: Path) -> set[int]:
    """The processes the handler noted it ran in (judger.testing.handlers._note_process)."""
    return {int(p.name.split("-")[0]) for p in folder.iterdir()}


def _all_gone(pids: set[int], within: float = 20.0) -> bool:
    deadline = time.monotonic() + within
    while not all(_gone(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize("handler", ["spinning", "batch_spinning"])
async def test_calls_that_overrun_leave_nothing_running(tmp_path: Path, handler: str) -> None:
    """A handler stuck in a loop burns the CPU of a process that is killed at the deadline, not of
    a thread of this one that nothing can stop (four such threads made every later batch slower)."""
    judger = NativeJudger(
        reward_handler=f"judger.testing.handlers:{handler}", timeout=0.5, extra_info={"pids": str(tmp_path)}
    )
    try:
        hung = [await judger.judge(state("spin")) for _ in range(4)]
        assert all(s.status is Status.FAILED for s in hung)
        assert all(s.extra_fields["judge_failure"]["kind"] == "timeout" for s in hung)
        ran = _ran_in(tmp_path)
        assert ran and os.getpid() not in ran, "the calls ran on threads of this process"
        assert _all_gone(ran), "a process that ran a timed-out call is still alive"
        assert judger.execution == "process" and judger.thread_reason is None
        # what comes after is judged as before
        out = await judger.batch_judge([state("1"), state("2"), state("1")])
        assert [s.reward["score"] for s in out] == [1.0, 0.0, 1.0]
    finally:
        await judger.aclose()


async def test_a_sample_queued_behind_hung_calls_keeps_its_whole_deadline() -> None:
    """More hung calls than workers, each sample judged on its own as XTuner's actors call
    ``judge_payload``: the good one waits for a worker, and its deadline starts when one takes it."""
    judger = NativeJudger(reward_handler="judger.testing.handlers:spinning", timeout=0.5, execution="process")
    payloads = [judger.preprocess(state("spin")) for _ in range(2 * (os.cpu_count() or 1))]
    good = judger.preprocess(state("1"))
    try:
        results = await asyncio.gather(
            *(judger.judge_payload(p) for p in [*payloads, good]), return_exceptions=True
        )
    finally:
        await judger.aclose()
    assert all(isinstance(r, JudgeTimeoutError) for r in results[:-1])
    assert results[-1] == {"score": 1.0, "acc": True, "pred": "1"}


def _local_handler() -> Any:
    def reward(response: str, label: Any, extra_info: dict) -> dict:
        return {"score": float(response == label)}

    return reward


def _main_reward(response: str, label: Any, extra_info: dict) -> dict:
    return {"score": 1.0}


@pytest.fixture
def main_handler(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A function of the script being run, as a user's ``python train.py`` defines it: pickle takes
    it (by reference to ``__main__``), and no worker process has it."""
    monkeypatch.setattr(_main_reward, "__module__", "__main__")
    monkeypatch.setattr(_main_reward, "__qualname__", "_judger_test_main_reward")
    monkeypatch.setattr(sys.modules["__main__"], "_judger_test_main_reward", _main_reward, raising=False)
    return _main_reward


async def test_a_handler_no_worker_can_load_runs_on_threads_and_says_why(
    caplog: pytest.LogCaptureFixture, main_handler: Any
) -> None:
    caplog.set_level(logging.WARNING, logger="judger.judgers.execution")
    judger = JudgerConfig(judger_name="closure", reward_handler=_local_handler()).build()
    assert isinstance(judger, NativeJudger)
    assert judger.execution == "thread" and "cannot be pickled" in (judger.thread_reason or "")
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "'closure'" in warning and "runs on threads" in warning and "cannot be pickled" in warning
    assert "importable module" in warning and "execution='thread'" in warning
    assert (await judger.judge(state("1"))).reward == {"score": 1.0}
    caplog.clear()
    # the script's own function: pickle takes it, no worker imports it
    main = NativeJudger("main", reward_handler=main_handler)
    assert main.execution == "thread" and "script being run (__main__)" in (main.thread_reason or "")
    assert "script being run (__main__)" in caplog.records[0].getMessage()
    caplog.clear()
    # declared safe on threads: nothing to say
    declared = NativeJudger("declared", reward_handler=_local_handler(), execution="thread")
    assert declared.execution == "thread" and declared.thread_reason is None and not caplog.records


@pytest.mark.parametrize("handler", [_local_handler(), "main", lambda response, label, extra_info: {}])
def test_process_execution_is_refused_at_build_for_a_handler_no_worker_can_load(
    handler: Any, request: pytest.FixtureRequest
) -> None:
    if handler == "main":
        handler = request.getfixturevalue("main_handler")
    config = JudgerConfig(judger_name="asked", reward_handler=handler, execution="process")
    with pytest.raises(ValueError, match="execution='process'") as refused:
        config.build()
    assert "importable module" in str(refused.value) and "execution='thread'" in str(refused.value)


def test_extra_info_that_cannot_travel_keeps_the_handler_on_threads() -> None:
    import threading

    judger = NativeJudger(
        reward_handler="judger.testing.handlers:exact_match", extra_info={"lock": threading.Lock()}
    )
    assert judger.execution == "thread" and "lock" in (judger.thread_reason or "")


async def test_threads_declared_for_a_handler_that_runs_on_no_thread_are_refused() -> None:
    async def reward(response: str, label: Any, extra_info: dict) -> dict:
        return {"score": 1.0}

    with pytest.raises(ValueError, match="execution='thread'.*async function.*remove execution"):
        JudgerConfig(judger_name="a", reward_handler=reward, execution="thread").build()
    with pytest.raises(ValueError, match="execution='process'.*a URL"):
        NativeJudger(reward_handler="http://127.0.0.1:9/reward", execution="process")
    # left alone, they run on the event loop as before
    assert NativeJudger(reward_handler=reward).execution == "auto"


async def test_a_handler_a_worker_turns_out_unable_to_load_runs_on_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """As pytest loads a test module by its path: its package here is not what a fresh interpreter
    finds under that name (another ``tests`` installed, say). Nothing at build can tell; the first
    call has a worker load the handler, and it cannot."""
    import importlib
    import importlib.util

    found = tmp_path / "found" / "shadowpkg"  # what a worker imports as shadowpkg: no handler in it
    loaded = tmp_path / "loaded" / "shadowpkg"  # what this process loaded as shadowpkg
    for folder in (found, loaded):
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("")
    (loaded / "handler_mod.py").write_text(
        "def reward(response, label, extra_info):\n    return {'score': 1.0}\n"
    )
    monkeypatch.syspath_prepend(str(found.parent))
    spec = importlib.util.spec_from_file_location(
        "shadowpkg", loaded / "__init__.py", submodule_search_locations=[str(loaded)]
    )
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(package)
    monkeypatch.setitem(sys.modules, "shadowpkg", package)
    caplog.set_level(logging.WARNING, logger="judger.judgers.execution")
    try:
        module = importlib.import_module("shadowpkg.handler_mod")
        judger = NativeJudger("shadowed", reward_handler=module.reward, timeout=5)
        assert judger.execution == "process" and not caplog.records  # nothing at build says otherwise
        out = await judger.batch_judge([state("1"), state("2")])
        assert [s.reward for s in out] == [{"score": 1.0}, {"score": 1.0}]
        assert judger.execution == "thread" and "a worker process cannot load it" in (
            judger.thread_reason or ""
        )
        assert "ModuleNotFoundError" in (judger.thread_reason or "")
        (warning,) = [r.getMessage() for r in caplog.records]
        assert "'shadowed'" in warning and "runs on threads" in warning
        await judger.aclose()
    finally:
        sys.modules.pop("shadowpkg.handler_mod", None)
