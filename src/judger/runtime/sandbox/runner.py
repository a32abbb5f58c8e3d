"""Run untrusted programs against tests in a kernel sandbox, from the host side.

:func:`run_tests` starts one sandbox per sample: bubblewrap (:mod:`.bwrap`) around a trusted
supervisor (``inside/supervisor.py``) that starts the worker processes holding the program
(``inside/worker.py``). The host sends the program and the test *inputs*, never the expected
outputs, and reads one framed report per test from the supervisor, with every read capped
(``output_mb``); stdout (as bytes, never decoded whole) and return values are compared here by
``check``. In ``assert`` mode the test code runs in the supervisor, calling the program's functions
through a pipe and getting plain values back, so the program cannot reach or forge the verdict.

Limits (:class:`SandboxLimits`): wall seconds per test (the supervisor kills the worker and all it
started; the host kills the whole sandbox if the supervisor itself overruns), CPU seconds per test,
address space, file size, processes (threads included), open files, and the total size and inodes
of scratch (a private tmpfs). When its part is done a sandbox is killed at once and handed to
:mod:`.janitor`, which gives back what it holds once the kernel lets go; callers wait for that
outside their deadline (:func:`teardown_after`).

``isolation="none-unsafe"`` runs the same supervisor without bubblewrap, in a host temp directory,
guarded only by rlimits and a CPython audit hook: for trusted code or machines where bubblewrap
cannot run, never for model-written programs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from judger.core import loops
from judger.core.deadlines import wait_for
from judger.core.errors import JudgerError
from judger.runtime.sandbox import ahead as ahead_module
from judger.runtime.sandbox import bwrap, cgroups, janitor, uids
from judger.runtime.sandbox.ahead import Ahead
from judger.runtime.sandbox.inside import wire
from judger.runtime.sandbox.seccomp import filter_program, fork_filter

Mode = Literal["stdin", "call", "assert"]
TestStatus = Literal["passed", "failed", "error", "timeout", "crashed", "not_run"]
Isolation = Literal["bwrap", "none-unsafe"]
ISOLATIONS: tuple[str, ...] = ("bwrap", "none-unsafe")

DEFAULT_MEMORY_MB = 1024
"""The program's default address-space limit: the one place it is written (the code preset, the code
scorer and verl's code route all read it)."""

SUPERVISOR_PATH = os.path.join(bwrap.INSIDE_DIR, "supervisor.py")
# interpreter start-up inside the sandbox, before the program's own clock starts
_STARTUP_ALLOWANCE_S = 5.0
_HEADER_SLACK = 1 << 16


class SandboxStartError(JudgerError, RuntimeError):
    """The sandbox itself did not come up (not the program's doing): a judge failure, never a score."""


@dataclass(frozen=True)
class SandboxLimits:
    """Per-run limits. Times are per test; memory, output and files per process; scratch per sample.

    ``scratch_inodes`` bounds the files and folders of the scratch (where the judge runs as root:
    see :func:`judger.runtime.sandbox.bwrap.command`); ``allow_ptys`` gives the program a devpts,
    whose ptys come out of the machine's one pool (``kernel.pty.max``), so it is off by default.
    """

    wall_s: float = 10.0
    cpu_s: float = 10.0
    memory_mb: int = DEFAULT_MEMORY_MB
    output_mb: int = 64
    scratch_mb: int = 256
    scratch_inodes: int = 16384
    processes: int = 64
    open_files: int = 256
    allow_subprocess: bool = False
    allow_ptys: bool = False
    isolation: Isolation = "bwrap"

    def __post_init__(self) -> None:
        for name in ("wall_s", "cpu_s"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and value > 0 and math.isfinite(value)):
                raise ValueError(f"SandboxLimits.{name} must be a positive number of seconds, got {value!r}")
        for name in ("memory_mb", "output_mb", "scratch_mb", "scratch_inodes", "processes", "open_files"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value > 0):
                raise ValueError(f"SandboxLimits.{name} must be a positive integer, got {value!r}")
        if self.isolation not in ISOLATIONS:
            raise ValueError(
                f"SandboxLimits.isolation must be one of {ISOLATIONS}, got {self.isolation!r} "
                "('none-unsafe' runs untrusted code without kernel isolation)"
            )


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
"""Turns the report on test ``i`` (``status`` "ok", with ``stdout``, a bytearray, or ``output``)
into an outcome."""
Decided = Callable[[list[TestOutcome | None]], bool]
"""True once the remaining tests cannot change the score: the run stops there."""


def require_isolation(isolation: Isolation) -> None:
    """Raise :class:`bwrap.IsolationUnavailable` when ``isolation`` cannot be had on this machine."""
    if isolation == "bwrap":
        bwrap.require()


def _session_members(sid: int) -> list[int]:
    found = []
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    stat = handle.read()
            except OSError:
                continue
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


_SUPERVISOR_TASKS = 8  # the supervisor and the worker's own threads, beyond the program's processes
_CONTROL_MB = 192  # the supervisor and the worker's interpreter, beyond the program's memory and scratch
_HANDSHAKE_S = 15.0
# how long a sample's caller waits for its sandboxes' teardown before leaving it to the janitor
# (a teardown the kernel stalls, e.g. a process stuck in the kernel, does not stall the judge)
TEARDOWN_WAIT_S = 30.0


@dataclass
class _Channel:
    """The host's ends of the supervisor's stdin, stdout and stderr (None: not read).

    Unix socket pairs, not pipes: uvloop closes a pipe handed to ``connect_*_pipe`` twice (libuv
    closes the fd, then uvloop closes the file object, one loop turn later); a file opened by
    another thread in between, another sandbox's stdin under a busy judge, was shut under it
    (EBADF). A socket it closes once, and so does asyncio's loop.
    """

    stdin: socket.socket
    stdout: socket.socket
    stderr: socket.socket | None

    @classmethod
    def open(cls, with_stderr: bool) -> tuple[_Channel, list[socket.socket]]:
        """The host's ends, and the child's (to hand to Popen, then close)."""
        stdin, child_stdin = socket.socketpair()
        stdout, child_stdout = socket.socketpair()
        stderr, child_stderr = socket.socketpair() if with_stderr else (None, None)
        children = [child_stdin, child_stdout, *([child_stderr] if child_stderr is not None else [])]
        return cls(stdin, stdout, stderr), children

    def close(self) -> None:
        for end in (self.stdin, self.stdout, self.stderr):
            if end is not None:
                end.close()


class _Sandbox:
    """One supervisor process (under bubblewrap or not) serving the tests from ``start`` on.

    The host process is a plain :class:`subprocess.Popen` whose channel is read on the event loop:
    its teardown (:meth:`release`) then needs no event loop, and its reaping none either.
    """

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        channel: _Channel,
        cap: int,
        scratch: str | None,
        uid: uids.UidLease | None = None,
        group: cgroups.SandboxCgroup | None = None,
    ) -> None:
        self.popen = popen
        self.channel = channel
        self.cap = cap
        self.scratch = scratch
        self.uid = uid
        self.group = group
        # the sandbox's first process (the first stage's init, or the supervisor): killing it kills
        # every process of its PID namespace
        self.pidfd = -1
        self.stdout: asyncio.StreamReader | None = None
        self.stderr: asyncio.StreamReader | None = None
        self.stdin: asyncio.StreamWriter | None = None
        self._transports: list[asyncio.BaseTransport] = []
        self._released: concurrent.futures.Future[None] | None = None

    async def connect(self) -> None:
        """The host process's pipes, onto the running event loop."""
        loop = asyncio.get_running_loop()
        channel = self.channel
        self.stdout = asyncio.StreamReader(limit=self.cap + _HEADER_SLACK)
        self.stderr = asyncio.StreamReader(limit=self.cap + _HEADER_SLACK)
        for reader, end in ((self.stdout, channel.stdout), (self.stderr, channel.stderr)):
            if end is not None:
                protocol = asyncio.StreamReaderProtocol(reader)
                transport, _ = await loop.connect_read_pipe(lambda p=protocol: p, end)  # type: ignore[misc]
                self._transports.append(transport)
        if channel.stderr is None:
            self.stderr.feed_eof()
        writer_protocol = asyncio.StreamReaderProtocol(asyncio.StreamReader())
        writer, _ = await loop.connect_write_pipe(lambda: writer_protocol, channel.stdin)
        self._transports.append(writer)
        self.stdin = asyncio.StreamWriter(writer, writer_protocol, None, loop)

    async def handshake(self, info_fd: int, block_fd: int) -> None:
        """Learn the host pid of the sandbox's first process, place it in the cgroup while bubblewrap
        waits on ``block_fd``, then let it go on."""
        pid = bwrap.child_pid(await _read_info(info_fd, _HANDSHAKE_S))
        if pid is None:
            reason = await self.stderr_tail()
            raise SandboxStartError(f"the bubblewrap sandbox failed to start ({reason})")
        try:
            self.pidfd = os.pidfd_open(pid)
            if self.group is not None:
                self.group.attach(pid)
        except OSError as exc:
            raise SandboxStartError(f"the sandbox could not be confined: {exc}") from None
        with contextlib.suppress(OSError):
            os.write(block_fd, b"1")

    async def stderr_tail(self) -> str:
        """What bubblewrap said on its way out (it writes its reason there), or its exit status."""
        text = b""
        if self.stderr is not None:
            with contextlib.suppress(TimeoutError, ValueError):
                text = await wait_for(self.stderr.read(4096), 2)
        deadline = time.monotonic() + 2
        while self.popen.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        reason = text.decode("utf-8", "replace").strip()
        return reason[-1000:] or f"exit status {self.popen.returncode}"

    async def next_message(self, timeout: float) -> dict[str, Any] | None:
        """The next report (``stdout`` attached, as bytes), None at EOF or on a broken frame."""
        assert self.stdout is not None
        try:
            line = await wait_for(self.stdout.readline(), timeout)
        except ValueError:  # a header past the cap
            return None
        if not line:
            return None
        try:
            # bounded before decoding: a line of `[],` runs costs many times its bytes to decode,
            # and this runs on the judge's event loop
            message = wire.loads(line)
        except wire.TooLarge as exc:
            return {"event": "refused", "error": f"the sandbox's report was refused: {exc}"}
        except wire.WireError:
            return None
        if not isinstance(message, dict):
            return None
        size = message.pop("stdout_len", None)
        if size is not None:
            if not (isinstance(size, int) and 0 <= size <= self.cap):
                return None
            message["stdout"] = await wait_for(self._payload(size), timeout)
        return message

    async def _payload(self, size: int) -> bytearray:
        """``size`` bytes of stdout, read into one buffer as they arrive: never decoded (invalid UTF-8
        decoded would cost the judge twice its size or more) nor held twice (``readexactly`` keeps
        all of it in the reader's buffer, grown step by step, then copies it out)."""
        assert self.stdout is not None
        payload = bytearray(size)
        view = memoryview(payload)
        filled = 0
        while filled < size:
            chunk = await self.stdout.read(size - filled)
            if not chunk:
                raise asyncio.IncompleteReadError(b"", size)
            view[filled : filled + len(chunk)] = chunk
            filled += len(chunk)
        return payload

    def _kill(self) -> None:
        if self.pidfd >= 0:
            # init of a PID namespace: the kernel kills every process in it with it
            with contextlib.suppress(ProcessLookupError, PermissionError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        if self.group is not None:
            self.group.kill()
        if self.scratch is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, signal.SIGKILL)
        else:
            kill_session(self.popen.pid)  # no PID namespace: the session is what we have

    def _close_pipes(self) -> None:
        for transport in self._transports:
            with contextlib.suppress(RuntimeError):  # an event loop already closed
                if transport.is_closing():
                    continue
                if isinstance(transport, asyncio.WriteTransport):
                    transport.abort()  # what is still buffered for it is dropped, not flushed
                else:
                    transport.close()
        # at once, not when the loop gets to the transports' callbacks (it may never); a socket a
        # transport still holds (uvloop's) is closed by that transport, once
        with contextlib.suppress(OSError):
            self.channel.close()

    def release(self) -> concurrent.futures.Future[None]:
        """Kill the sandbox now and hand what it holds (its process to reap, pidfd, cgroup, uid
        lease, scratch) to the janitor; synchronous, so that however the sample ends -- a cancel, its
        event loop closing, an error -- this runs in full. The future is done once all of it is
        given back; the same one on every call."""
        if self._released is None:
            self._kill()
            self._close_pipes()
            remains = janitor.Remains(self.popen, self.pidfd, self.group, self.uid, self.scratch)
            self.pidfd, self.group, self.uid, self.scratch = -1, None, None, None
            self._released = janitor.submit(remains)
        return self._released


_teardowns: contextvars.ContextVar[list[concurrent.futures.Future[None]] | None] = contextvars.ContextVar(
    "judger_sandbox_teardowns", default=None
)


async def wait_torn_down(
    done: Sequence[concurrent.futures.Future[None]], timeout: float = TEARDOWN_WAIT_S
) -> None:
    """Wait until these sandboxes are torn down, at most ``timeout`` seconds (the janitor goes on)."""
    if done:
        await asyncio.wait([asyncio.wrap_future(future) for future in done], timeout=timeout)


@contextlib.contextmanager
def teardowns_collected() -> Iterator[list[concurrent.futures.Future[None]]]:
    """The teardowns of the sandboxes released inside the block, collected for the caller to wait
    for (:func:`wait_torn_down`) when it chooses, e.g. once it has given its slot to the next sample."""
    pending: list[concurrent.futures.Future[None]] = []
    token = _teardowns.set(pending)
    try:
        yield pending
    finally:
        _teardowns.reset(token)


@contextlib.asynccontextmanager
async def teardown_after() -> AsyncIterator[None]:
    """Sandboxes released inside the block are waited for at its end, not where they are released:
    a deadline inside the block (a judger's per-sample ``timeout``) never runs out on the kernel's
    teardown of a sandbox, whatever the program left in it, while the caller still holds its slot
    until the sandbox is gone."""
    pending: list[concurrent.futures.Future[None]] = []
    token = _teardowns.set(pending)
    try:
        yield
    finally:
        _teardowns.reset(token)
        await wait_torn_down(pending)


def _let_go(sandbox: _Sandbox) -> None:
    """Release ``sandbox``; its teardown is waited for where :func:`teardown_after` says."""
    done = sandbox.release()
    pending = _teardowns.get()
    if pending is not None and done not in pending:
        pending.append(done)


async def _read_info(fd: int, timeout: float) -> bytes:
    """bubblewrap's ``--info-fd`` JSON from pipe ``fd``: until it is complete, EOF or ``timeout``
    (closes ``fd``)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    data = bytearray()

    def readable() -> None:
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        data.extend(chunk)
        complete = bwrap.child_pid(bytes(data)) is not None
        if (not chunk or complete or len(data) > 65536) and not done.done():
            done.set_result(None)

    os.set_blocking(fd, False)
    loop.add_reader(fd, readable)
    try:
        with contextlib.suppress(TimeoutError):
            await wait_for(done, timeout)
    finally:
        loop.remove_reader(fd)
        os.close(fd)
    return bytes(data)


def _cgroup(limits: SandboxLimits) -> cgroups.SandboxCgroup | None:
    memory = (limits.memory_mb + limits.scratch_mb + _CONTROL_MB) * 1024 * 1024
    try:
        return cgroups.create(limits.processes + _SUPERVISOR_TASKS, memory)
    except OSError as exc:
        raise SandboxStartError(f"the sandbox's cgroup could not be made: {exc}") from None


@dataclass
class _Launch:
    """How to start one sandbox, and what to give back if it never starts."""

    argv: list[str]
    cwd: str
    pass_fds: list[int] = field(default_factory=list)
    info_r: int = -1
    block_w: int = -1
    scratch: str | None = None
    uid: uids.UidLease | None = None
    group: cgroups.SandboxCgroup | None = None

    def close_handshake(self) -> None:
        for fd in (self.info_r, self.block_w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.info_r = self.block_w = -1

    def abandon(self) -> None:
        self.close_handshake()
        if self.group is not None:
            self.group.remove()
        if self.uid is not None:
            self.uid.release()
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)


def _bwrap_launch(limits: SandboxLimits) -> _Launch:
    require_isolation("bwrap")
    launch = _Launch([], "/")
    try:
        _prepare_bwrap(launch, limits)
    except BaseException:
        # a sandbox that never starts gives back its pipes and its uid lease (a leaked lease keeps
        # its uid slot locked for the life of the process)
        for fd in launch.pass_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        launch.abandon()
        raise
    return launch


def _prepare_bwrap(launch: _Launch, limits: SandboxLimits) -> None:
    """Fill ``launch`` step by step, so that whatever it holds when a step fails can be given back."""
    program = filter_program()
    seccomp_fd = None
    if program is not None:
        read_end, write_end = os.pipe()
        launch.pass_fds.append(read_end)
        try:
            os.write(write_end, program)
        finally:
            os.close(write_end)
        seccomp_fd = read_end
    launch.info_r, info_w = os.pipe2(os.O_CLOEXEC)
    launch.pass_fds.append(info_w)
    block_r, launch.block_w = os.pipe2(os.O_CLOEXEC)
    launch.pass_fds.append(block_r)
    if bwrap.drops_to_own_uid():
        launch.uid = uids.lease()
    launch.group = _cgroup(limits)
    launch.argv = bwrap.command(
        scratch_bytes=limits.scratch_mb * 1024 * 1024,
        seccomp_fd=seccomp_fd,
        host_uid=None if launch.uid is None else launch.uid.uid,
        info_fd=info_w,
        block_fd=block_r,
        scratch_inodes=limits.scratch_inodes,
        ptys=limits.allow_ptys,
    )


def _unconfined_launch() -> _Launch:
    scratch = tempfile.mkdtemp(prefix="judger-sandbox-")
    return _Launch([sys.executable, "-I", SUPERVISOR_PATH], scratch, scratch=scratch)


@contextlib.asynccontextmanager
async def prepared_ahead(limits: SandboxLimits, *, ahead: int, samples: int) -> AsyncIterator[Ahead[Any]]:
    """Within the block, sandboxes for ``limits`` start before the samples that take them: up to
    ``ahead`` at once, for the ``samples`` to come (:mod:`.ahead`). Those left at its end are given
    back and torn down before it ends."""
    released: list[concurrent.futures.Future[None]] = []

    def let_go(sandbox: _Sandbox) -> None:
        released.append(sandbox.release())

    preparing = Ahead(limits, ahead, samples, functools.partial(_launch, limits), _alive, let_go)
    token = ahead_module.enter(preparing)
    try:
        yield preparing
    finally:
        ahead_module.leave(token)
        try:
            await preparing.close()
        finally:
            await wait_torn_down(released)


def _alive(sandbox: _Sandbox) -> bool:
    return sandbox.popen.poll() is None


async def _start(job: dict[str, Any], limits: SandboxLimits, *, ahead: bool = True) -> tuple[_Sandbox, bool]:
    """A sandbox for ``job``: one started ahead (:func:`prepared_ahead`), else one started now; and
    whether it was started ahead."""
    preparing = ahead_module.current(limits) if ahead else None
    sandbox = await preparing.take() if preparing is not None else None
    prepared = sandbox is not None
    if sandbox is None:
        sandbox = await _launch(limits)
    try:
        await _send_job(sandbox, job)
    except BaseException:
        _let_go(sandbox)
        raise
    return sandbox, prepared


async def _launch(limits: SandboxLimits) -> _Sandbox:
    """A sandbox started, confined and waiting for its job on stdin."""
    cap = limits.output_mb * 1024 * 1024
    env = {"PATH": os.defpath, "LANG": "C.UTF-8"}
    launch = _bwrap_launch(limits) if limits.isolation == "bwrap" else _unconfined_launch()
    channel, child_ends = _Channel.open(with_stderr=limits.isolation == "bwrap")
    try:
        popen = subprocess.Popen(
            launch.argv,
            stdin=child_ends[0].fileno(),
            stdout=child_ends[1].fileno(),
            stderr=child_ends[2].fileno() if len(child_ends) > 2 else subprocess.DEVNULL,
            cwd=launch.cwd,
            env=env,
            pass_fds=launch.pass_fds,
            start_new_session=True,
        )
    except BaseException:
        launch.abandon()
        channel.close()
        raise
    finally:
        for fd in launch.pass_fds:
            os.close(fd)
        for end in child_ends:
            end.close()
    sandbox = _Sandbox(popen, channel, cap, launch.scratch, launch.uid, launch.group)
    try:
        await sandbox.connect()
        await _handshake(sandbox, launch)
    except BaseException:
        # cancelled or failed before the caller holds it: given back here
        launch.close_handshake()
        _let_go(sandbox)
        raise
    return sandbox


async def _handshake(sandbox: _Sandbox, launch: _Launch) -> None:
    """Place a bubblewrap sandbox in its cgroup before it goes on (nothing to do without bubblewrap)."""
    info_r, launch.info_r = launch.info_r, -1  # closed by the handshake
    try:
        if info_r >= 0:
            await sandbox.handshake(info_r, launch.block_w)
    finally:
        if launch.block_w >= 0:
            with contextlib.suppress(OSError):
                os.close(launch.block_w)
            launch.block_w = -1


async def _send_job(sandbox: _Sandbox, job: dict[str, Any]) -> None:
    stdin = sandbox.stdin
    assert stdin is not None
    try:
        stdin.write(json.dumps(job).encode())
        await stdin.drain()
        stdin.close()
    except (BrokenPipeError, ConnectionResetError):
        pass  # it died at once: reported as a crash of the first test


def _job(
    code: str, mode: Mode, tests: list[list[Any]], limits: SandboxLimits, **extra: Any
) -> dict[str, Any]:
    return {
        "code": code,
        "mode": mode,
        "tests": tests,
        **extra,
        "isolated": limits.isolation == "bwrap",
        "startup_s": _STARTUP_ALLOWANCE_S,
        "limits": {
            "wall_s": limits.wall_s,
            "cpu_s": limits.cpu_s,
            "memory_bytes": limits.memory_mb * 1024 * 1024,
            "output_bytes": limits.output_mb * 1024 * 1024,
            "processes": limits.processes,
            "open_files": limits.open_files,
            "allow_subprocess": limits.allow_subprocess,
            # installed by the worker on itself before the program runs: the kernel, not only the
            # audit hook, refuses new processes (RLIMIT_NPROC does nothing when the judge is root)
            "fork_filter": None if limits.allow_subprocess else _fork_filter_hex(),
        },
    }


@functools.cache
def _fork_filter_hex() -> str | None:
    program = fork_filter()
    return None if program is None else program.hex()


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
    budget_s: float | None = None,
) -> SandboxResult:
    """Run ``code`` on each test input in order, stopping once ``decided`` says the score is known.

    ``tests`` are the inputs as the sandbox takes them: stdin text (``"stdin"``), an argument list
    (``"call"``, with ``fn_name``) or test source code (``"assert"``, with an optional
    ``entry_point`` passed to the test's ``check``). ``budget_s`` bounds the wall time of all the
    tests together: once the program has spent it, the test in hand and the rest are timeouts (a
    verdict on the program), so that a caller's deadline above it is not what ends the sample.
    Raises :class:`~judger.runtime.sandbox.bwrap.IsolationUnavailable` when bubblewrap cannot run here.

    Each sandbox is killed as soon as its part is done, and its teardown waited for at the end
    (or, inside :func:`teardown_after`, at the end of that block), never before the next test.
    """
    if _teardowns.get() is None:
        async with teardown_after():
            return await run_tests(
                code,
                mode,
                tests,
                check,
                limits=limits,
                decided=decided,
                fn_name=fn_name,
                entry_point=entry_point,
                budget_s=budget_s,
            )
    limits = limits or SandboxLimits()
    n = len(tests)
    outcomes: list[TestOutcome | None] = [None] * n
    result = SandboxResult(outcomes=[], network="netns+audit" if limits.isolation == "bwrap" else "audit")
    started = time.monotonic()
    deadline = None if budget_s is None else started + budget_s
    next_test = 0
    # the supervisor answers each test within wall_s plus a worker start-up; this bounds the supervisor
    per_test_s = limits.wall_s + 2 * _STARTUP_ALLOWANCE_S + 2
    while next_test < n and not (decided and decided(outcomes)) and not result.load_error:
        if deadline is not None and time.monotonic() >= deadline:
            break
        job = _job(
            code,
            mode,
            [[i, tests[i]] for i in range(next_test, n)],
            limits,
            fn_name=fn_name,
            entry_point=entry_point,
        )
        result.processes += 1
        next_test = await _start_and_serve(
            job, limits, outcomes, check, decided, result, per_test_s, deadline
        )
        if deadline is not None and time.monotonic() >= deadline:
            break
        if next_test < n and outcomes[next_test] is None and not result.load_error:
            outcomes[next_test] = TestOutcome("crashed", "the sandbox stopped answering")
            next_test += 1
    if deadline is not None and time.monotonic() >= deadline and not (decided and decided(outcomes)):
        for i in range(n):
            if outcomes[i] is None:
                outcomes[i] = TestOutcome("timeout", _budget_spent(deadline - started))
    if result.load_error:
        for i in range(n):
            if outcomes[i] is None:
                outcomes[i] = TestOutcome("error", result.load_error)
    result.outcomes = [o if o is not None else TestOutcome("not_run") for o in outcomes]
    result.elapsed_s = time.monotonic() - started
    return result


async def _start_and_serve(
    job: dict[str, Any],
    limits: SandboxLimits,
    outcomes: list[TestOutcome | None],
    check: Checker,
    decided: Decided | None,
    result: SandboxResult,
    per_test_s: float,
    deadline: float | None,
) -> int:
    """:func:`_serve` ``job`` on a sandbox; one prepared ahead that fails before it is ready is
    replaced by one started now.

    A prepared sandbox can die while it waits (an OOM kill, an operator) a moment before it is
    taken: its outer bubblewrap has not yet seen its supervisor go, so the take's liveness check
    passes. None of the program's code has run before ``ready``, so starting again runs nothing
    twice, and the sample does not pay for a loss of the pool's.
    """

    async def served(sandbox: _Sandbox) -> int:
        try:
            return await _serve(sandbox, job, outcomes, check, decided, result, per_test_s, deadline)
        finally:
            _let_go(sandbox)

    sandbox, prepared = await _start(job, limits)
    if not prepared:
        return await served(sandbox)
    try:
        return await served(sandbox)
    except SandboxStartError:
        pass  # the pool's loss, not the sample's: once more, on a sandbox of its own
    result.processes += 1
    sandbox, _ = await _start(job, limits, ahead=False)
    return await served(sandbox)


def _budget_spent(budget_s: float) -> str:
    return f"the sample's time budget of {budget_s:g} s for all its tests was spent"


async def _serve(
    sandbox: _Sandbox,
    job: dict[str, Any],
    outcomes: list[TestOutcome | None],
    check: Checker,
    decided: Decided | None,
    result: SandboxResult,
    per_test_s: float,
    deadline: float | None = None,
) -> int:
    """Read reports until the sandbox ends, hangs or the outcome is decided; return the test in hand."""
    pending = [i for i, _ in job["tests"]]
    position = 0
    ready = False  # the supervisor says so before any of the program's code can run
    while position < len(pending):
        current = pending[position]
        wait = per_test_s
        if ready and deadline is not None:  # before ready the time is the judge's, not the program's
            wait = min(per_test_s, max(deadline - time.monotonic(), 0.01))
        try:
            message = await sandbox.next_message(wait)
        except (TimeoutError, asyncio.IncompleteReadError):
            return _silent(ready, current, outcomes, per_test_s, deadline)
        if message is None:
            if not ready:
                raise await _start_failure(sandbox, job)
            return current
        event = message.get("event")
        if event == "ready":
            ready = True
            continue
        stop = _control_event(message, ready, current, outcomes, result)
        if stop is not None:
            return stop
        if event != "test" or message.get("index") != current:
            continue
        outcomes[current] = _test_outcome(current, message, check)
        position += 1
        if decided and decided(outcomes):
            return len(outcomes)
    return len(outcomes)


def _silent(
    ready: bool, current: int, outcomes: list[TestOutcome | None], per_test_s: float, deadline: float | None
) -> int:
    """The test in hand when the sandbox said nothing in time (raises when it never started)."""
    if not ready:
        raise SandboxStartError(f"the sandbox did not start within {per_test_s:g} s") from None
    if deadline is not None and time.monotonic() >= deadline:
        return current  # run_tests reports this test and the rest as the budget's timeouts
    outcomes[current] = TestOutcome("timeout", "the sandbox did not answer in time")
    return current + 1


async def _start_failure(sandbox: _Sandbox, job: dict[str, Any]) -> SandboxStartError:
    """Why a sandbox ended before it was ready (it is finished here)."""
    reason = await sandbox.stderr_tail() if job["isolated"] else ""
    sandbox.release()
    kind = "bubblewrap sandbox" if job["isolated"] else "sandbox supervisor"
    reason = reason or f"exit status {sandbox.popen.returncode}"
    return SandboxStartError(f"the {kind} failed to start ({reason})")


def _control_event(
    message: dict[str, Any],
    ready: bool,
    current: int,
    outcomes: list[TestOutcome | None],
    result: SandboxResult,
) -> int | None:
    """The test in hand when a supervisor's event ends the run (raises when the sandbox failed);
    None for every other message."""
    event = message.get("event")
    if event == "refused":
        if not ready:
            raise SandboxStartError(str(message["error"]))
        outcomes[current] = TestOutcome("error", str(message["error"]))
        return current + 1
    if event == "sandbox_error":
        error = str(message.get("error", ""))[:2000]
        raise SandboxStartError(f"the sandbox could not confine the program: {error}")
    if event == "load_error":
        result.load_error = str(message.get("error", "the program failed to load"))[:2000]
        return current
    return None


def _test_outcome(current: int, message: dict[str, Any], check: Checker) -> TestOutcome:
    status = message.get("status")
    if status == "ok":
        return check(current, message)
    if status in ("timeout", "crashed"):
        return TestOutcome(status, str(message.get("error", ""))[:2000])
    return TestOutcome("error", str(message.get("error", ""))[:2000])


# --- running from synchronous code -------------------------------------------------------------

_sync_slots = threading.BoundedSemaphore(max(1, os.cpu_count() or 1))


def run_sync(coro_fn: Callable[[], Any]) -> Any:
    """Run ``coro_fn()`` to completion from synchronous code, in any thread, at most one sandbox per CPU."""
    with _sync_slots:
        return loops.run_sync(coro_fn)
