"""Run untrusted programs against tests in a confined, killable subprocess.

:func:`run_tests` starts ``python -I child.py`` in a fresh scratch directory (deleted
afterwards) as the leader of a new session, sends it the program and the test *inputs*, and reads
one result per test. Expected outputs never enter the child: the comparison happens here, so a
program cannot report its own success. In ``assert`` mode the test code runs in the child (as in
HumanEval), so the verdict comes from there: reports must carry a per-run random token, on a
descriptor at a random number, which stops a program writing fake reports to guessed descriptors;
one that digs the token out of the interpreter's memory could still forge them.

Limits (see :class:`SandboxLimits`): wall seconds per test (enforced here: the whole process group
is SIGKILLed), CPU seconds per test (``RLIMIT_CPU`` in the child), address space (``RLIMIT_AS``),
output file size (``RLIMIT_FSIZE``). Processes: the child may not create any (audit hook: fork,
exec, spawn, subprocess, system), and after every run the process group and anything left in the
child's session are SIGKILLed. ``RLIMIT_NPROC`` is not used: the kernel exempts uid 0 from it, and
for other users it counts every process the user has on the machine. Network: a
private network namespace when the kernel permits (root, or unprivileged user namespaces), plus an
audit hook that refuses sockets in every case; :attr:`SandboxResult.network` says which applied.
Files: writes outside the scratch directory are refused by the audit hook.

A test that times out, crashes the interpreter or exhausts its CPU time fails alone: the child is
restarted at the next test when the outcome is not yet decided.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import secrets
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Mode = Literal["stdin", "call", "assert"]
TestStatus = Literal["passed", "failed", "error", "timeout", "crashed", "not_run"]

CHILD_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "child.py")
# startup of the interpreter, the limits and the program's own top-level code
_STARTUP_ALLOWANCE_S = 5.0
_READ_LIMIT = 256 * 1024 * 1024
_CHILD_ENV_KEEP = ("PATH", "LANG", "LC_ALL", "SYSTEMROOT")


@dataclass(frozen=True)
class SandboxLimits:
    """Per-run limits. Times are per test; memory and output are per process."""

    wall_s: float = 10.0
    cpu_s: float = 10.0
    memory_mb: int = 1024
    output_mb: int = 64
    allow_subprocess: bool = False

    def __post_init__(self) -> None:
        for name in ("wall_s", "cpu_s"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and value > 0 and math.isfinite(value)):
                raise ValueError(f"SandboxLimits.{name} must be a positive number of seconds, got {value!r}")
        for name in ("memory_mb", "output_mb"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value > 0):
                raise ValueError(f"SandboxLimits.{name} must be a positive integer, got {value!r}")


@dataclass
class TestOutcome:
    """What happened to one test."""

    __test__ = False  # not a pytest test class

    status: TestStatus
    detail: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "passed"


@dataclass
class SandboxResult:
    """The outcome of every test (``not_run`` where stopping early skipped it)."""

    outcomes: list[TestOutcome]
    network: str = ""
    load_error: str = ""
    elapsed_s: float = 0.0
    processes: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> int:
        return sum(o.passed for o in self.outcomes)

    @property
    def run(self) -> int:
        return sum(o.status != "not_run" for o in self.outcomes)

    def first_failure(self) -> TestOutcome | None:
        return next((o for o in self.outcomes if o.status not in ("passed", "not_run")), None)


Checker = Callable[[int, dict[str, Any]], TestOutcome]
"""Turns the child's report on test ``i`` into an outcome (compares against the expected output)."""
Decided = Callable[[list[TestOutcome | None]], bool]
"""True once the remaining tests cannot change the score: the run stops there."""


def _child_env(scratch: str) -> dict[str, str]:
    env = {k: os.environ[k] for k in _CHILD_ENV_KEEP if k in os.environ}
    env.update(
        HOME=scratch,
        TMPDIR=scratch,
        PYTHONIOENCODING="utf-8",
        OMP_NUM_THREADS="1",
        OPENBLAS_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
    )
    env.setdefault("PATH", os.defpath)
    return env


def _session_members(sid: int) -> list[int]:
    """Processes still in session ``sid`` (a child that changed process group but not session)."""
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        # fields after the parenthesised command: state ppid pgrp session ...
        rest = stat[stat.rfind(b")") + 2 :].split()
        if len(rest) > 3 and int(rest[3]) == sid and int(entry) != sid:
            found.append(int(entry))
    return found


def kill_session(pid: int) -> None:
    """SIGKILL the process group led by ``pid`` and whatever else is left in its session."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    for member in _session_members(pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(member, signal.SIGKILL)


def _crash_detail(returncode: int | None) -> tuple[TestStatus, str]:
    if returncode is None or returncode >= 0:
        return "crashed", f"the program ended the interpreter (exit code {returncode})"
    sig = -returncode
    if sig == signal.SIGXCPU:
        return "timeout", "CPU time limit exceeded"
    if sig == signal.SIGXFSZ:
        return "error", "output size limit exceeded"
    try:
        name = signal.Signals(sig).name
    except ValueError:
        name = str(sig)
    return "crashed", f"killed by {name}"


def _after_exit(
    run: _Run, returncode: int | None, mode: Mode, scratch: str, index: int, check: Checker
) -> TestOutcome:
    """The outcome of the test in hand when the child stopped without reporting it."""
    if run.timed_out is not None:
        return TestOutcome(*run.timed_out)
    if mode == "stdin" and returncode == 0:
        # os._exit(0) after printing: the program ended normally, its output is in the file
        try:
            with open(os.path.join(scratch, f"out_{index}.txt"), "rb") as handle:
                produced = handle.read().decode("utf-8", errors="replace")
        except OSError:
            produced = None
        if produced is not None:
            return check(
                index, {"event": "test", "index": index, "status": "ok", "stdout": produced, "error": ""}
            )
    return TestOutcome(*_crash_detail(returncode))


class _Run:
    """One child process serving the tests from ``start`` on."""

    def __init__(self, proc: asyncio.subprocess.Process, token: str) -> None:
        self.proc = proc
        self.token = token
        self.timed_out: tuple[TestStatus, str] | None = None

    async def next_message(self, timeout: float) -> dict[str, Any] | None:
        """The next report, None at EOF; raises TimeoutError past ``timeout``."""
        assert self.proc.stdout is not None
        while True:
            try:
                line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
            except ValueError:  # a line past the read limit: the program flooded our channel
                return None
            if not line:
                return None
            try:
                message = json.loads(line)
            except ValueError:
                continue  # not ours: something the program wrote to the channel
            if isinstance(message, dict) and message.get("token") == self.token:
                return message

    async def finish(self) -> int | None:
        kill_session(self.proc.pid)
        try:
            return await asyncio.wait_for(self.proc.wait(), 10)
        except TimeoutError:
            return self.proc.returncode


async def _start(job: dict[str, Any], scratch: str) -> _Run:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-I",
        CHILD_PATH,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        cwd=scratch,
        env=_child_env(scratch),
        start_new_session=True,
        limit=_READ_LIMIT,
    )
    assert proc.stdin is not None
    token = secrets.token_hex(16)
    try:
        proc.stdin.write(json.dumps({**job, "token": token}).encode())
        await proc.stdin.drain()
        proc.stdin.close()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the child died at once: reported as a crash of the first test
    except BaseException:
        kill_session(proc.pid)  # cancelled before the caller holds the process: do not leak it
        raise
    return _Run(proc, token)


async def run_tests(
    code: str,
    mode: Mode,
    tests: Sequence[Any],
    check: Checker,
    *,
    limits: SandboxLimits | None = None,
    decided: Decided | None = None,
    fn_name: str | None = None,
    entry_point: str | None = None,
) -> SandboxResult:
    """Run ``code`` on each test input in order, stopping once ``decided`` says the score is known.

    ``tests`` are the inputs as the child takes them: stdin text (``"stdin"``), an argument list
    (``"call"``, with ``fn_name``) or test source code (``"assert"``, with an optional
    ``entry_point`` passed to the test's ``check``).
    """
    limits = limits or SandboxLimits()
    n = len(tests)
    outcomes: list[TestOutcome | None] = [None] * n
    result = SandboxResult(outcomes=[])
    started = time.monotonic()
    scratch = tempfile.mkdtemp(prefix="judger-sandbox-")
    next_test = 0
    try:
        while next_test < n and not (decided and decided(outcomes)):
            job = {
                "code": code,
                "mode": mode,
                "tests": [[i, tests[i]] for i in range(next_test, n)],
                "fn_name": fn_name,
                "entry_point": entry_point,
                "cpu_s": limits.cpu_s,
                "memory_bytes": limits.memory_mb * 1024 * 1024,
                "output_bytes": limits.output_mb * 1024 * 1024,
                "allow_subprocess": limits.allow_subprocess,
            }
            result.processes += 1
            run = await _start(job, scratch)
            try:
                next_test = await _serve(run, job, outcomes, check, limits, decided, result)
            finally:
                returncode = await run.finish()
            current = next_test
            if current < n and outcomes[current] is None and not result.load_error:
                outcomes[current] = _after_exit(run, returncode, mode, scratch, current, check)
                next_test = current + 1
            if result.load_error:
                break
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if result.load_error:
        for i in range(n):
            if outcomes[i] is None:
                outcomes[i] = TestOutcome("error", result.load_error)
    result.outcomes = [o if o is not None else TestOutcome("not_run") for o in outcomes]
    result.elapsed_s = time.monotonic() - started
    return result


async def _serve(
    run: _Run,
    job: dict[str, Any],
    outcomes: list[TestOutcome | None],
    check: Checker,
    limits: SandboxLimits,
    decided: Decided | None,
    result: SandboxResult,
) -> int:
    """Read reports until the child ends, hangs or the outcome is decided; return the test in hand."""
    pending = [i for i, _ in job["tests"]]
    position = 0
    ready = False
    while position < len(pending):
        current = pending[position]
        try:
            message = await run.next_message(limits.wall_s if ready else _STARTUP_ALLOWANCE_S)
        except TimeoutError:
            if ready:
                run.timed_out = ("timeout", f"wall time limit of {limits.wall_s:g} s exceeded")
            else:
                run.timed_out = ("crashed", f"the sandbox did not start within {_STARTUP_ALLOWANCE_S:g} s")
            return current
        if message is None:
            return current
        event = message.get("event")
        if event == "ready":
            result.network = str(message.get("network", ""))
            ready = True
            continue
        if event == "loaded":
            continue
        if event == "load_error":
            result.load_error = str(message.get("error", "the program failed to load"))
            return current
        if event != "test" or message.get("index") != current:
            continue
        outcomes[current] = check(current, message)
        position += 1
        if decided and decided(outcomes):
            return len(outcomes)
    return len(outcomes)


# --- running from synchronous code -------------------------------------------------------------

_sync_slots = threading.BoundedSemaphore(max(1, os.cpu_count() or 1))


def run_sync(coro_fn: Callable[[], Any]) -> Any:
    """Run ``coro_fn()`` to completion from synchronous code, in any thread, at most one sandbox per CPU.

    With an event loop already running in this thread, the coroutine runs on a private loop in a
    helper thread (never nested in the caller's loop).
    """
    with _sync_slots:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(coro_fn())
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["value"] = asyncio.run(coro_fn())
            except BaseException as exc:
                box["error"] = exc

        thread = threading.Thread(target=target, name="judger-sandbox")
        thread.start()
        thread.join()
        if "error" in box:
            raise box["error"]
        return box["value"]
