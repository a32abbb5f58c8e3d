"""A sample's end: nothing of it outlives its sample, whether the caller cancels it (once, or again
while it is being taken down) or the judge dies.

The cancel travels through judger's own deadlines (``judger.core.deadlines.wait_for``), whose
implementation differs by interpreter (``asyncio.timeout`` on 3.11+, judger's fallback on 3.10):
these run on Python 3.10 too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from judger import CodeJudgerConfig, RolloutState
from judger.runtime.sandbox import bwrap, cgroups
from judger.runtime.sandbox.runner import SandboxLimits
from judger.scorers.code import score_async
from judger.testing.processes import sandbox_processes_after

# serial: what outlives a sample is found by its uid, among every process of the machine, so a
# sandbox another test runs meanwhile would count as this one's
pytestmark = [
    pytest.mark.py310,
    pytest.mark.serial,
    pytest.mark.skipif(bool(bwrap.probe()), reason=f"bubblewrap unavailable: {bwrap.probe()}"),
]

DOUBLE = {"inputs": ["21"], "outputs": ["42"]}
REPO = Path(__file__).resolve().parents[2]


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


OUTLIVER = textwrap.dedent(
    """
    import ctypes, os, sys, time
    libc = ctypes.CDLL(None)
    pid = os.fork()
    if pid == 0:
        os.setsid()
        libc.prctl(1, 0, 0, 0, 0)  # PR_SET_PDEATHSIG 0: no parent-death signal
        for fd in range(3, 256):
            try:
                os.close(fd)
            except OSError:
                pass
        while True:
            time.sleep(1)  # MARK
    print("started", flush=True)
    time.sleep(30)
    """
)


def _sandbox_uid_processes() -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("Uid:") and int(line.split()[1]) >= 0x70000000:
                found.append(int(entry))
    return found


ESCAPE = SandboxLimits(wall_s=60.0, cpu_s=60.0, memory_mb=512, output_mb=16, allow_subprocess=True)


async def _outliver_started() -> tuple[asyncio.Task[Any], set[int]]:
    """OUTLIVER's sample as a task, once its processes run; and the sandbox processes from before."""
    before = set(_sandbox_uid_processes())
    task = asyncio.create_task(score_async(fenced(OUTLIVER), DOUBLE, limits=ESCAPE))
    deadline = time.monotonic() + 20
    while len(set(_sandbox_uid_processes()) - before) < 3 and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert len(set(_sandbox_uid_processes()) - before) >= 3  # supervisor, worker, the setsid child
    return task, before


async def test_a_cancelled_sample_leaves_no_process() -> None:
    task, before = await _outliver_started()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    deadline = time.monotonic() + 5
    while set(_sandbox_uid_processes()) - before and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert set(_sandbox_uid_processes()) - before == set()
    assert sandbox_processes_after(5.0) == []


def test_no_process_of_a_sample_survives_the_judge_process_being_killed(tmp_path: Path) -> None:
    script = tmp_path / "judge.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import asyncio
            from judger.runtime.sandbox.runner import SandboxLimits
            from judger.scorers.code import score_async
            limits = SandboxLimits(wall_s=60.0, cpu_s=60.0, allow_subprocess=True)
            asyncio.run(score_async({fenced(OUTLIVER)!r}, {DOUBLE!r}, limits=limits))
            """
        )
    )
    before = set(_sandbox_uid_processes())
    judge_proc = subprocess.Popen([sys.executable, str(script)], cwd=REPO, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while len(set(_sandbox_uid_processes()) - before) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        started = set(_sandbox_uid_processes()) - before
        assert len(started) >= 3, "the sample never started"
    finally:
        judge_proc.send_signal(signal.SIGKILL)
        judge_proc.wait()
    deadline = time.monotonic() + 10
    while started & set(_sandbox_uid_processes()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert started & set(_sandbox_uid_processes()) == set(), "a sandbox process outlived the judge"


def _held() -> set[tuple[str, str]]:
    """This process's descriptors of what a sample holds: pidfds and uid leases (not every
    descriptor: Ray or a pool left running by another test opens and closes its own meanwhile)."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target == "anon_inode:[pidfd]" or "judger-sandbox-uids" in target:
            found.add((fd, target))
    return found


async def test_a_second_cancel_while_the_sample_ends_still_gives_everything_back() -> None:
    # a per-sample deadline fires, and while its sandbox is being taken down the batch's own
    # deadline (or the trainer) cancels again: the uid lease and the pidfd still come back, or
    # a long run of such batches uses up the judge's descriptors and every later sample fails
    held = _held()
    task, before = await _outliver_started()
    task.cancel()
    await asyncio.sleep(0)  # the first cancel reaches the sample: it kills it and waits for bubblewrap
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # a poll: the teardown's normal second or so, with room for a loaded machine's reaping (this
    # 5 s bound failed under the stress run's load, on the code before and after)
    deadline = time.monotonic() + 30
    while (_held() != held or set(_sandbox_uid_processes()) - before) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert _held() - held == set()
    assert set(_sandbox_uid_processes()) - before == set()


def _own_folders() -> set[str]:
    """This process's sandbox cgroup folders (other judges on the machine share the hierarchy)."""
    layout = cgroups._layout()
    if isinstance(layout, str):
        return set()
    prefix = f"s-{os.getpid()}-"
    parents = [p for p in (layout.pids, layout.memory) if p is not None]
    return {os.path.join(p, name) for p in parents for name in os.listdir(p) if name.startswith(prefix)}


def _all_given_back(held: set[tuple[str, str]], before: set[int], timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        left = {
            "folders": _own_folders(),
            "held": _held() - held,
            "processes": set(_sandbox_uid_processes()) - before,
        }
        if not any(left.values()) or time.monotonic() > deadline:
            return {key: value for key, value in left.items() if value}
        time.sleep(0.05)


# a sample whose sandbox is slow to take down: a scratch full of folders (as many as it may make)
HEAVY = textwrap.dedent(
    """
    import os, time
    try:
        for i in range(1 << 21):
            os.mkdir(f"d{i}")
    except OSError:
        pass
    time.sleep(60)
    """
)


@pytest.mark.parametrize("how", ["deadline", "dropped"])
def test_a_sample_whose_event_loop_closes_under_it_gives_everything_back(how: str) -> None:
    # verl's batch path runs asyncio.run(judger.batch_judge(...)), which closes the loop once the
    # batch returns: here after the sample's deadline (its program spent the budget, its sandbox
    # slow to take down), or while the sample still runs (the caller returned without it)
    held, before = _held(), set(_sandbox_uid_processes())

    async def judge() -> None:
        judger = CodeJudgerConfig(wall_s=60, cpu_s=60, timeout=8 if how == "deadline" else 120).build()
        state = RolloutState(response=fenced(HEAVY), reward_model={"ground_truth": DOUBLE})
        batch = asyncio.ensure_future(judger.batch_judge([state]))
        if how == "deadline":
            (out,) = await batch
            assert out.reward is not None and out.reward["score"] == 0.0, out.error_msg
            return
        deadline = time.monotonic() + 20
        while len(set(_sandbox_uid_processes()) - before) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        await asyncio.sleep(2)  # into its folders
        assert not batch.done()

    asyncio.run(judge())
    assert _all_given_back(held, before, timeout=15) == {}


def test_a_live_judge_sweeps_the_folders_it_left() -> None:
    # a sandbox whose teardown never ran (its coroutine dropped unfinalized): this judge's empty
    # folder is removed while the judge lives, not only by a judge started minutes later
    layout = cgroups._layout()
    if isinstance(layout, str):
        pytest.skip(f"no cgroups here: {layout}")
    asyncio.run(score_async(fenced("print(42)"), DOUBLE, limits=ESCAPE))  # the judge has run a sandbox
    leftover = [os.path.join(p, f"s-{os.getpid()}-0123456789ab") for p in (layout.pids, layout.memory) if p]
    for folder in leftover:
        os.mkdir(folder)
    try:
        deadline = time.monotonic() + 15
        while any(os.path.exists(f) for f in leftover) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(os.path.exists(f) for f in leftover)
    finally:
        for folder in leftover:
            with contextlib.suppress(OSError):
                os.rmdir(folder)


HEAVY_CALL = textwrap.dedent(
    """
    import os
    def f(x):
        block = bytearray(256 << 20)
        for i in range(0, len(block), 4096):
            block[i] = 1
        try:
            for i in range(1 << 20):
                os.mkdir(f"d{x}-{i}")
        except OSError:
            pass
        return -1
    """
)


async def test_early_stop_waits_for_the_teardown_and_leaves_nothing_behind() -> None:
    # continuous=False stops at the first failure: the worker, its memory and its folders are live
    held, before = _held(), set(_sandbox_uid_processes())
    tests = {"inputs": [[i] for i in range(12)], "outputs": [i for i in range(12)], "fn_name": "f"}
    judger = CodeJudgerConfig(wall_s=20, cpu_s=20, continuous=False).build()
    state = RolloutState(response=fenced(HEAVY_CALL), reward_model={"ground_truth": tests})
    honest = RolloutState(response=fenced("def f(x):\n    return x"), reward_model={"ground_truth": tests})
    out = await judger.batch_judge([state, honest])
    assert [s.reward and s.reward["score"] for s in out] == [0.0, 1.0]
    assert _all_given_back(held, before, timeout=0.5) == {}
