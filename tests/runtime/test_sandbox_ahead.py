"""Sandboxes prepared ahead of the samples (judger.runtime.sandbox.ahead): the next ones start while
the current ones run, each is used by one sample only, a dead one is never handed out, those left
over are torn down before the batch ends, and a program cannot reach the sandbox that waits for the
next sample."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from judger import CodeJudgerConfig, RolloutState
from judger.runtime.sandbox import bwrap, runner
from judger.runtime.sandbox.ahead import Ahead
from judger.runtime.sandbox.runner import SandboxLimits, prepared_ahead
from judger.scorers.code import score_async
from judger.testing.processes import cmdlines, descends_from_us, sandbox_processes_after

# py310: a prepared sandbox's start is cancelled and waited for at the batch's end, through the
# deadlines and cancels that differ by interpreter
pytestmark = [
    pytest.mark.py310,
    pytest.mark.skipif(bool(bwrap.probe()), reason=f"bubblewrap unavailable: {bwrap.probe()}"),
]

LIMITS = SandboxLimits(wall_s=10.0, cpu_s=10.0, memory_mb=512)
DOUBLE = {"inputs": ["21\n"], "outputs": ["42\n"]}
HONEST = "```python\nprint(int(input()) * 2)\n```"
WRONG = "```python\nprint(int(input()) * 3)\n```"


def _waiting_supervisors() -> list[int]:
    """This process's sandbox supervisors, one per sandbox (not the worker each forks ahead)."""
    lines = cmdlines()

    def parent(pid: int) -> int:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
        return int(stat[stat.rfind(b")") + 2 :].split()[1])

    def supervisor(cmdline: bytes) -> bool:  # bubblewrap's own command line names it too
        return b"supervisor.py" in cmdline and not cmdline.startswith(b"/usr/bin/bwrap")

    found = []
    for pid, cmdline in lines.items():
        try:
            if supervisor(cmdline) and not supervisor(lines.get(parent(pid), b"")) and descends_from_us(pid):
                found.append(pid)
        except OSError:
            continue
    return found


def _descendants() -> str:
    """What this process has started, for a failure's message (a line each, in full: a string
    message is not shortened by pytest)."""
    lines = cmdlines()
    mine = [pid for pid in lines if pid != os.getpid() and descends_from_us(pid)]
    return "\n".join(f"{pid} (state {_state(pid)}): {lines[pid][-160:]!r}" for pid in mine)


def _state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return "gone"
    return stat[stat.rfind(b")") + 2 :].split()[0].decode()


async def _one_waiting_supervisor(preparing: Ahead[Any]) -> int:
    """The supervisor of the one sandbox ``preparing`` started. It comes up within a second here;
    a stress run saw none within 10 s: 60 s is a hang guard, and a failure says what had started."""
    deadline = time.monotonic() + 60
    while not _waiting_supervisors() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    found = _waiting_supervisors()
    assert len(found) == 1, f"prepared {preparing.prepared}, started:\n{_descendants()}"
    return found[0]


@pytest.fixture(autouse=True)
def nothing_left_behind() -> None:
    yield
    assert sandbox_processes_after(10.0) == []


@pytest.mark.parametrize("isolation", ["bwrap", "none-unsafe"])
async def test_the_next_sandbox_starts_while_the_current_sample_runs(isolation: str) -> None:
    # the running sample sleeps 15 s; a sandbox is launched (started and confined, before its
    # supervisor's interpreter comes up) in well under a second. Counted by the launches, not by
    # the supervisors' processes: a stress run saw no supervisor appear within 10 s
    limits = SandboxLimits(wall_s=40.0, cpu_s=10.0, memory_mb=512, isolation=isolation)
    slow = "```python\nimport time\ntime.sleep(15)\nprint(int(input()) * 2)\n```"
    async with prepared_ahead(limits, ahead=1, samples=3) as preparing:
        first = asyncio.create_task(score_async(slow, DOUBLE, limits=limits))
        # the running sample's sandbox, and the next sample's, launched while the first still runs
        while preparing.prepared < 2 and not first.done():
            await asyncio.sleep(0.05)
        assert preparing.prepared == 2 and not first.done(), _descendants()
        rest = [await score_async(HONEST, DOUBLE, limits=limits) for _ in range(2)]
        done = await first
    assert [r["score"] for r in (done, *rest)] == [1.0, 1.0, 1.0]
    assert preparing.taken == 3  # every sample started on a prepared sandbox


async def test_left_over_sandboxes_are_torn_down_before_the_batch_ends() -> None:
    async with prepared_ahead(LIMITS, ahead=3, samples=5) as preparing:
        assert (await score_async(HONEST, DOUBLE, limits=LIMITS))["score"] == 1.0
        deadline = time.monotonic() + 10
        while preparing.prepared < 3 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    # three prepared for the samples that never came: gone when the block ends, not later
    assert _waiting_supervisors() == []


async def test_a_prepared_sandbox_that_died_is_never_handed_out() -> None:
    async with prepared_ahead(LIMITS, ahead=1, samples=2) as preparing:
        waiting = await _one_waiting_supervisor(preparing)
        os.kill(waiting, signal.SIGKILL)  # it dies while it waits (an OOM kill, an operator)
        # the whole sandbox goes with its supervisor (bubblewrap's stages follow it within a moment)
        assert sandbox_processes_after(30.0) == []
        result = await score_async(HONEST, DOUBLE, limits=LIMITS)
    assert result["score"] == 1.0 and result["error"] == ""
    assert preparing.taken == 0  # the dead one was given back; the sample started its own


async def test_a_sample_handed_a_sandbox_dying_as_it_is_taken_starts_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the moment between a supervisor's death and its outer bubblewrap's, when the take's liveness
    # check still passes (a stress run met it): here the check always passes
    monkeypatch.setattr(runner, "_alive", lambda sandbox: True)
    async with prepared_ahead(LIMITS, ahead=1, samples=2) as preparing:
        os.kill(await _one_waiting_supervisor(preparing), signal.SIGKILL)
        assert sandbox_processes_after(30.0) == []
        result = await score_async(HONEST, DOUBLE, limits=LIMITS)
    assert preparing.taken == 1  # the dead one was handed out
    assert result["score"] == 1.0 and result["error"] == ""  # and the sample did not pay for it


# A program that tries to reach the sandbox waiting for the next sample, to plant a verdict there:
# every process it can see, signalled; every process of the machine it can name, signalled; the
# scratch of another sandbox, which it could only reach through /proc.
REACH_THE_NEXT = """```python
import os, signal
for sig in (signal.SIGKILL, signal.SIGSTOP):
    try:
        os.kill(-1, sig)
    except OSError:
        pass
for pid in range(2, 32768):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            with open(f"/proc/{pid}/root/tmp/planted.py", "w") as fh:
                fh.write("print(42)")
        except OSError:
            pass
print(int(input()) * 2)
```"""


async def test_a_program_cannot_reach_the_sandbox_prepared_for_the_next_sample() -> None:
    judger = CodeJudgerConfig(wall_s=10, cpu_s=10, memory_mb=512, max_parallel=1).build()
    responses = (REACH_THE_NEXT, WRONG, HONEST, WRONG.replace("* 3", "* 4"))
    states = [RolloutState(response=r, reward_model={"ground_truth": DOUBLE}) for r in responses]
    try:
        done = await judger.batch_judge(states)
    finally:
        await judger.aclose()
    # the attacker's own verdict is its own; the samples after it, on the sandboxes prepared while
    # it ran, are judged as they deserve
    assert [s.reward["score"] for s in done] == [1.0, 0.0, 1.0, 0.0]
    assert all(s.reward["error"] in ("", "failed: wrong answer") for s in done)


async def test_a_code_judger_batch_prepares_its_sandboxes_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    from judger.runtime.sandbox import ahead

    seen: list[ahead.Ahead[object]] = []
    enter = ahead.enter

    def spy(preparing: ahead.Ahead[object]) -> object:
        seen.append(preparing)
        return enter(preparing)

    monkeypatch.setattr(ahead, "enter", spy)
    judger = CodeJudgerConfig(wall_s=10, cpu_s=10, memory_mb=512, max_parallel=2).build()
    # distinct programs: the judger would score one payload for six equal ones
    programs = [HONEST.replace("\n```", f"  # {i}\n```") for i in range(6)]
    states = [RolloutState(response=p, reward_model={"ground_truth": DOUBLE}) for p in programs]
    try:
        done = await judger.batch_judge(states)
    finally:
        await judger.aclose()
    assert [s.reward["score"] for s in done] == [1.0] * 6
    (preparing,) = seen
    assert preparing.ahead == 2 and preparing.taken == 6


async def test_the_next_sample_starts_while_the_last_ones_sandbox_is_taken_down(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import concurrent.futures
    import threading

    from judger.runtime.sandbox import runner

    events: list[tuple[str, float]] = []
    teardowns: list[concurrent.futures.Future[None]] = []
    submit = runner.janitor.submit

    def slow_teardown(remains: object) -> concurrent.futures.Future[None]:
        # the kernel taking 0.8 s to let go of a sandbox (a scratch with many files, say)
        done = submit(remains)  # type: ignore[arg-type]
        later: concurrent.futures.Future[None] = concurrent.futures.Future()

        def finish() -> None:
            done.result()
            events.append(("torn down", time.monotonic()))
            later.set_result(None)

        threading.Timer(0.8, finish).start()
        teardowns.append(later)
        return later

    send_job = runner._send_job

    async def sent(sandbox: object, job: dict[str, object]) -> None:
        events.append(("job sent", time.monotonic()))
        await send_job(sandbox, job)  # type: ignore[arg-type]

    monkeypatch.setattr(runner.janitor, "submit", slow_teardown)
    monkeypatch.setattr(runner, "_send_job", sent)
    judger = CodeJudgerConfig(wall_s=10, cpu_s=10, memory_mb=512, max_parallel=1).build()
    programs = [HONEST, HONEST.replace("\n```", "  # another\n```")]
    states = [RolloutState(response=p, reward_model={"ground_truth": DOUBLE}) for p in programs]
    try:
        done = await judger.batch_judge(states)
    finally:
        await judger.aclose()
    assert [s.reward["score"] for s in done] == [1.0, 1.0]
    # one sample at a time, yet the second's job went out before the first's sandbox was gone
    jobs = [t for kind, t in events if kind == "job sent"]
    first_gone = min(t for kind, t in events if kind == "torn down")
    assert len(jobs) == 2 and jobs[1] < first_gone
    # and the batch returned only once every sandbox of it was torn down
    assert all(f.done() for f in teardowns)
