"""What a judged program can reach of other processes, of the host and of other samples.

Each program tries what an RL policy could learn to do to forge a pass or hurt the judge, run as
root the way CI and many clusters run: write into the sandbox's pid 1 or reach its descriptors,
share answers through kernel keyrings, change or lease host files it appears to own, use up
per-user kernel quotas, start threads without bound. Each is paired with an honest control that
still scores 1.0. Outliving the sample or the judge: test_sandbox_sample_end.py.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import platform
import secrets
import stat
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from judger import CodeJudgerConfig, RolloutState
from judger.runtime.sandbox import bwrap, cgroups
from judger.runtime.sandbox.runner import SandboxLimits
from judger.scorers.code import compute_score, score_async
from judger.testing.processes import sandbox_processes

pytestmark = pytest.mark.skipif(bool(bwrap.probe()), reason=f"bubblewrap unavailable: {bwrap.probe()}")

LIMITS = SandboxLimits(wall_s=5.0, cpu_s=5.0, memory_mb=512, output_mb=16, scratch_mb=64)
DOUBLE = {"inputs": ["21"], "outputs": ["42"]}
HONEST = "print(int(input()) * 2)"


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


async def judge(program: str, tests: dict[str, list[str]] = DOUBLE, **config: object) -> float:
    judger = CodeJudgerConfig(wall_s=5, cpu_s=5, **config).build()  # type: ignore[arg-type]
    (state,) = await judger.batch_judge(
        [RolloutState(response=fenced(program), reward_model={"ground_truth": tests})]
    )
    assert state.reward is not None, state.error_msg
    return float(state.reward["score"])


async def test_the_honest_control_passes() -> None:
    assert await judge(HONEST) == 1.0


# --- pid 1 is the supervisor: no memory, descriptors or signals of it are the program's ----------

# a passing report for test 0, as the host reads it from the supervisor's fd 1
FORGED = 'import json\nline = json.dumps({"event": "test", "index": 0, "status": "ok", "stdout_len": 3})\n'


async def test_pid_1_memory_and_descriptors_are_out_of_reach() -> None:
    probe = textwrap.dedent(
        """
        import os
        seen = []
        for what, flags in (("/proc/1/mem", os.O_RDWR), ("/proc/1/syscall", os.O_RDONLY),
                            ("/proc/1/environ", os.O_RDONLY)):
            try:
                os.close(os.open(what, flags)); seen.append(what)
            except OSError:
                pass
        try:
            fds = os.open("/proc/1/fd", os.O_RDONLY | os.O_DIRECTORY)
            os.close(os.open("1", os.O_WRONLY, dir_fd=fds)); seen.append("fd 1")
        except OSError:
            pass
        print("reached " + " ".join(seen) if seen else "refused")
        """
    )
    assert await judge(probe, {"inputs": [""], "outputs": ["refused"]}) == 1.0


FORGE_THROUGH_PID_1 = FORGED + textwrap.dedent(
    """
    import os
    for path in ("/proc/1/fd", "/proc/self/../1/fd"):
        try:
            fd = os.open("1", os.O_WRONLY, dir_fd=os.open(path, os.O_RDONLY | os.O_DIRECTORY))
            os.write(fd, (line + "\\n42\\n").encode())
        except OSError:
            pass
    print(0)
    """
)


async def test_a_report_forged_through_pid_1s_descriptors_scores_zero() -> None:
    assert await judge(FORGE_THROUGH_PID_1) == 0.0
    out = await asyncio.to_thread(compute_score, fenced(FORGE_THROUGH_PID_1), DOUBLE, wall_s=5, cpu_s=5)
    assert out["score"] == 0.0
    assert await judge(HONEST) == 1.0


def test_a_report_forged_through_pid_1_scores_zero_through_the_server() -> None:
    from judger.server.app import create_app
    from judger.testing import serve_asgi

    with serve_asgi(create_app(CodeJudgerConfig(wall_s=5, cpu_s=5))) as server:
        for program, want in ((FORGE_THROUGH_PID_1, 0.0), (HONEST, 1.0)):
            reply = httpx.post(
                server.url + "/reward", json={"response": fenced(program), "label": DOUBLE}, timeout=60
            )
            assert reply.status_code == 200 and reply.json()["score"] == want, reply.text


async def test_signals_to_the_supervisor_are_dropped() -> None:
    # SIGINT used to raise KeyboardInterrupt inside the supervisor (Python's own handler)
    program = textwrap.dedent(
        """
        import os, signal
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL, signal.SIGSTOP, signal.SIGUSR1):
            try:
                os.kill(1, sig)
            except OSError:
                pass
        print(int(input()) * 2)
        """
    )
    assert await judge(program, {"inputs": ["21", "5"], "outputs": ["42", "10"]}) == 1.0


# --- limits the kernel enforces for a root judge too ------------------------------------------------

# raw clone(CLONE_THREAD) from machine code: no stack, no malloc per thread; the child loops on pause()
_THREAD_BOMB = textwrap.dedent(
    """
    import ctypes, mmap
    # clone(flags, stack) from its two arguments; the children loop on pause() and use no stack
    # but each gets one of its own, so that two signal frames never land on the same memory
    code = bytes.fromhex(
        "48c7c038000000" "31d2" "4531d2" "4531c0" "0f05" "4885c0" "7509"
        "b822000000" "0f05" "ebf7" "c3"
    )
    buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    buf.write(code)
    TRIES, SPAN = 256, 16384  # far above the task limit: a limit not enforced shows as 256
    stacks = mmap.mmap(-1, TRIES * SPAN)
    base = ctypes.addressof(ctypes.c_char.from_buffer(stacks))
    spawn = ctypes.CFUNCTYPE(ctypes.c_long, ctypes.c_ulong, ctypes.c_ulong)(
        ctypes.addressof(ctypes.c_char.from_buffer(buf))
    )
    flags = 0x100 | 0x200 | 0x400 | 0x800 | 0x10000 | 0x40000  # VM FS FILES SIGHAND THREAD SYSVSEM
    made = 0
    for i in range(TRIES):
        if spawn(flags, base + (i + 1) * SPAN - 64) < 0:
            break
        made += 1
    print(made, flush=True)
    # out without Python's finalization, which would unmap the code and stacks of threads still
    # alive (one run in a suite on 4 workers over 2 cores was killed by SIGSEGV, never reproduced
    # since: this removes the one hazard the program itself holds)
    import os
    os._exit(0)
    """
)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the bomb is x86-64 machine code")
async def test_a_raw_clone_thread_bomb_stops_at_the_task_limit() -> None:
    limits = SandboxLimits(wall_s=20.0, cpu_s=10.0, memory_mb=64, processes=8, output_mb=16, scratch_mb=64)
    seen: dict[str, str] = {}

    def keep(index: int, report: dict[str, object]) -> object:
        from judger.runtime.sandbox.runner import TestOutcome

        seen["stdout"] = bytes(report.get("stdout", b"")).decode()  # type: ignore[arg-type]
        return TestOutcome("passed")

    from judger.runtime.sandbox.runner import run_tests

    result = await run_tests(_THREAD_BOMB, "stdin", [""], keep, limits=limits)
    assert "stdout" in seen, result.outcomes  # the program ran to its print
    made = int(seen["stdout"].strip() or "-1")
    # without the task limit all 256 start, each a kernel task charged to host root
    assert 0 <= made <= limits.processes + 8, made
    assert await judge(HONEST) == 1.0


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_filters_assemble_for_every_machine_we_have_a_table_for(machine: str) -> None:
    from judger.runtime.sandbox.seccomp import filter_program, fork_filter

    for program in (filter_program(machine), fork_filter(machine)):
        assert program is not None and len(program) % 8 == 0 and len(program) // 8 < 4096


async def test_ptys_only_when_asked() -> None:
    # bubblewrap's devpts draws on the machine's one pool: by default the sandbox has none
    program = textwrap.dedent(
        """
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.open(b"/dev/ptmx", 0o402, 0)
        print("pty" if fd >= 0 else os.strerror(ctypes.get_errno()))
        """
    )
    from judger.runtime.sandbox.runner import TestOutcome, run_tests

    seen: list[bytes] = []

    def keep(index: int, report: dict[str, object]) -> TestOutcome:
        seen.append(bytes(report.get("stdout", b"")))  # type: ignore[arg-type]
        return TestOutcome("passed")

    for allowed in (False, True):
        limits = SandboxLimits(wall_s=5.0, cpu_s=5.0, output_mb=16, scratch_mb=64, allow_ptys=allowed)
        await run_tests(program, "stdin", [""], keep, limits=limits)
    assert seen == [b"No such file or directory\n", b"pty\n"]


def test_cgroups_are_used_where_the_machine_has_them() -> None:
    # this machine has the v1 pids and memory hierarchies (shared/reference/sandbox-host-facts.md)
    if os.geteuid() != 0 or not Path("/sys/fs/cgroup/pids").is_dir():
        pytest.skip("no writable cgroup hierarchy here")
    assert cgroups.unavailable() == ""
    group = cgroups.create(12, 256 << 20)
    assert group is not None
    try:
        assert Path(group.folders[0], "pids.max").read_text().strip() == "12"
    finally:
        assert group.remove()


# --- no kernel state shared between samples, or with the judge ------------------------------------

_KEYCTL = textwrap.dedent(
    """
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    ADD_KEY, REQUEST_KEY, KEYCTL = {numbers}
    """
)


def _key_numbers() -> tuple[int, int, int]:
    return (248, 249, 250) if platform.machine() == "x86_64" else (217, 218, 219)


def _add_session_key(description: str, payload: bytes) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    add_key = _key_numbers()[0]
    return int(libc.syscall(add_key, b"user", description.encode(), payload, len(payload), -3))


async def test_keyrings_are_closed_to_programs() -> None:
    mark = f"judger-{secrets.token_hex(6)}"
    if _add_session_key(mark, b"42") < 0:
        pytest.skip("this process cannot add a key to its session keyring")
    head = _KEYCTL.format(numbers=_key_numbers())
    # the host's secret, and an honest sample's answer left for a later one
    steal = head + textwrap.dedent(
        f"""
        found = libc.syscall(REQUEST_KEY, b"user", b"{mark}", None, 0)
        buf = ctypes.create_string_buffer(64)
        n = libc.syscall(KEYCTL, 11, ctypes.c_long(found), buf, 64) if found > 0 else -1
        print(buf.raw[:n].decode() if n > 0 else "none")
        """
    )
    assert await judge(steal) == 0.0
    share = head + textwrap.dedent(
        f"""
        answer = str(int(input()) * 2).encode()
        ok = libc.syscall(ADD_KEY, b"user", b"{mark}-answer", answer, len(answer), -3) > 0
        print(answer.decode())
        """
    )
    cheat = head + textwrap.dedent(
        f"""
        found = libc.syscall(REQUEST_KEY, b"user", b"{mark}-answer", None, 0)
        buf = ctypes.create_string_buffer(64)
        n = libc.syscall(KEYCTL, 11, ctypes.c_long(found), buf, 64) if found > 0 else -1
        print(buf.raw[:n].decode() if n > 0 else "none")
        """
    )
    judger = CodeJudgerConfig(wall_s=5, cpu_s=5).build()
    states = [
        RolloutState(response=fenced(program), reward_model={"ground_truth": DOUBLE})
        for program in (share, cheat)
    ]
    honest, cheater = await judger.batch_judge(states)
    assert honest.reward is not None and honest.reward["score"] == 1.0
    assert cheater.reward is not None and cheater.reward["score"] == 0.0
    (later,) = await judger.batch_judge(
        [RolloutState(response=fenced(cheat), reward_model={"ground_truth": DOUBLE})]
    )
    assert later.reward is not None and later.reward["score"] == 0.0


# --- a program is never host root: host files, leases and quotas ------------------------------------


async def test_the_hosts_device_nodes_cannot_be_changed() -> None:
    before = {name: os.stat(f"/dev/{name}").st_mode for name in ("null", "zero", "full", "urandom")}
    program = textwrap.dedent(
        """
        import os
        changed = []
        for name in ("null", "zero", "full", "urandom"):
            for how in (lambda fd: os.fchmod(fd, 0o066), lambda fd: os.fchown(fd, 65534, 65534)):
                try:
                    fd = os.open("/dev/" + name, os.O_RDONLY)
                    how(fd)
                    changed.append(name)
                except OSError:
                    pass
        try:
            os.chmod("/dev/null", 0o000)
            changed.append("chmod")
        except OSError:
            pass
        print(int(input()) * 2 if not changed else " ".join(changed))
        """
    )
    try:
        assert await judge(program) == 1.0  # it printed the answer: every change was refused
        after = {name: os.stat(f"/dev/{name}").st_mode for name in before}
    finally:
        for name, mode in before.items():  # where it was not refused, the host is put right
            if os.stat(f"/dev/{name}").st_mode != mode:
                os.chmod(f"/dev/{name}", stat.S_IMODE(mode))
    assert after == before
    assert stat.S_IMODE(after["null"]) == 0o666
    assert await judge(HONEST) == 1.0


async def test_leases_on_host_files_are_refused_and_stall_nothing() -> None:
    supervisor = f"{bwrap.MOUNT_POINT}/supervisor.py"
    venv_cfg = os.path.join(sys.prefix, "pyvenv.cfg")
    targets = [supervisor, bwrap.inside_path(venv_cfg) if os.path.exists(venv_cfg) else supervisor]
    program = textwrap.dedent(
        f"""
        import fcntl, os, threading, time
        held = []
        for path in {targets!r}:
            for mode in (os.O_RDONLY, os.O_WRONLY):
                try:
                    fd = os.open(path, mode)
                    fcntl.fcntl(fd, 1024, fcntl.F_WRLCK if mode else fcntl.F_RDLCK)  # F_SETLEASE
                    held.append(path)
                except OSError:
                    pass
        time.sleep(1.5)
        print(int(input()) * 2 if not held else "leased " + " ".join(held))
        """
    )
    judger = CodeJudgerConfig(wall_s=5, cpu_s=5).build()
    started = time.monotonic()
    states = [
        RolloutState(response=fenced(program), reward_model={"ground_truth": DOUBLE}),
        RolloutState(response=fenced(HONEST), reward_model={"ground_truth": DOUBLE}),
    ]
    task = asyncio.create_task(judger.batch_judge(states))
    await asyncio.sleep(0.8)
    opened = time.monotonic()
    for path in (os.path.join(bwrap.INSIDE_DIR, "supervisor.py"), venv_cfg):
        if os.path.exists(path):
            Path(path).read_bytes()
    assert time.monotonic() - opened < 1.0  # a lease would block these opens up to 45 s
    leaser, honest = await task
    assert leaser.reward is not None and leaser.reward["score"] == 1.0, leaser.reward  # nothing leased
    assert honest.reward is not None and honest.reward["score"] == 1.0
    assert time.monotonic() - started < 30


async def test_inotify_quota_is_not_the_hosts() -> None:
    program = textwrap.dedent(
        """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        made = 0
        for _ in range(200):
            if libc.inotify_init1(0) < 0:
                break
            made += 1
        print(int(input()) * 2 if made == 0 else made)
        """
    )
    task = asyncio.create_task(judge(program))
    libc = ctypes.CDLL(None, use_errno=True)
    for _ in range(20):  # the host keeps its own instances while the sample runs
        fd = libc.inotify_init1(0)
        assert fd >= 0, os.strerror(ctypes.get_errno())
        os.close(fd)
        await asyncio.sleep(0.05)
    assert await task == 1.0


def _root_first_stage(argv: list[bytes]) -> bool:
    """judger's own programs that run as root before setpriv drops the uid: bubblewrap, setpriv,
    and the shell script that mounts the scratch (``bwrap._scratch_mount``; a stress run caught it)."""
    name = os.path.basename(argv[0])
    return name in (b"bwrap", b"setpriv") or (name in (b"sh", b"mount") and b"judger-scratch" in argv)


def test_the_sandbox_uid_is_never_host_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("the judge is not root here: the sandbox uid is the judge's own")
    seen: dict[int, int] = {}

    async def watch() -> None:
        program = fenced("import time\ntime.sleep(2)\nprint(42)")
        task = asyncio.create_task(score_async(program, DOUBLE, limits=LIMITS))
        while not task.done():
            for pid in sandbox_processes():
                try:
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    continue
                # a process with no argv (exited and not yet reaped, or between exec's steps)
                # runs nothing of its own
                if "\nState:\tZ" in status or not argv[0]:
                    continue
                if not _root_first_stage(argv):
                    seen[pid] = int(status.split("Uid:")[1].split()[1])
            await asyncio.sleep(0.05)
        assert (await task)["score"] == 1.0

    asyncio.run(watch())
    assert seen, "no sandbox process was seen"
    assert all(uid >= 0x70000000 for uid in seen.values()), seen


def test_a_root_judge_that_cannot_drop_its_uid_refuses_to_run_code(monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() != 0:
        pytest.skip("only a root judge drops to a uid of the sandbox's own")
    monkeypatch.setattr(bwrap, "SETPRIV", "/nonexistent/setpriv")
    bwrap.probe.cache_clear()
    try:
        reason = bwrap.probe()
        assert "setpriv" in reason and "util-linux" in reason and "root" in reason
        with pytest.raises(bwrap.IsolationUnavailable, match="setpriv"):
            CodeJudgerConfig().build()
    finally:
        bwrap.probe.cache_clear()
