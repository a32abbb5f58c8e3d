"""Hostile programs against the bubblewrap sandbox.

Each program is what an RL policy could write to forge a pass or hurt the judge. Many first escape
the CPython audit hook (``_posixsubprocess.fork_exec`` starts a fresh interpreter that has none),
so what they meet is the kernel boundary. Every one must score 0 (or fail the sample), leave no
process and no file outside its scratch, and leave the judger working.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import resource
import secrets
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judger import CodeJudgerConfig, RolloutState, Status
from judger.runtime.sandbox import bwrap
from judger.runtime.sandbox.runner import SandboxLimits, TestOutcome, run_tests
from judger.scorers.code import score_async
from judger.testing.processes import processes_with, sandbox_processes_after

pytestmark = pytest.mark.skipif(bool(bwrap.probe()), reason=f"bubblewrap unavailable: {bwrap.probe()}")

LIMITS = SandboxLimits(wall_s=5.0, cpu_s=5.0, memory_mb=512, output_mb=16, scratch_mb=64)
# By default the kernel refuses the program any new process (the worker's seccomp filter), so an
# escape through ``_posixsubprocess`` cannot even start. Tests of what an escaped process could
# reach run with subprocesses allowed, so that the layers under that filter are tested too.
ESCAPE = dataclasses.replace(LIMITS, allow_subprocess=True)

# a fresh interpreter without the audit hook, started the way an escaping program starts one (new session too)
UNHOOKED = """
import _posixsubprocess, os, sys
def unhooked(code, wait=True):
    r, w = os.pipe()
    er, ew = os.pipe()
    head = ([sys.executable, "-c", code], [os.fsencode(sys.executable)], True, (ew,), None, None,
            -1, -1, -1, w, -1, -1, er, ew, True, True)
    if sys.version_info >= (3, 11):  # process_group and use_vfork joined the signature in 3.11
        pid = _posixsubprocess.fork_exec(*head, -1, None, None, None, -1, None, False)
    else:
        pid = _posixsubprocess.fork_exec(*head, None, None, None, -1, None)
    os.close(w); os.close(ew)
    if not wait:
        return ""
    out = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        out += chunk
    return out.decode()  # not waited for: it may outlive us, which is the point
"""


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


@pytest.fixture(autouse=True)
def no_process_left_behind(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    host_tmp = tmp_path_factory.mktemp("host-tmp")
    monkeypatch.setattr(tempfile, "tempdir", str(host_tmp))  # where a host-side scratch would go
    yield
    assert list(host_tmp.iterdir()) == []  # scratch lives in the sandbox, never on the host
    assert sandbox_processes_after(5.0) == [], "a sandbox process outlived its sample"


async def stdout_of(program: str, limits: SandboxLimits = LIMITS) -> tuple[str, TestOutcome]:
    """Run ``program`` once (stdin mode) and return what it printed, whatever it printed."""
    seen: dict[str, Any] = {}

    def keep(index: int, report: dict[str, Any]) -> TestOutcome:
        seen.update(report)
        return TestOutcome("passed")

    result = await run_tests(program, "stdin", [""], keep, limits=limits)
    return seen.get("stdout", b"").decode("utf-8", "replace"), result.outcomes[0]


async def judger_still_works() -> None:
    judger = CodeJudgerConfig(wall_s=5, cpu_s=5).build()
    (state,) = await judger.batch_judge(
        [
            RolloutState(
                response=fenced("print(int(input()) * 2)"),
                reward_model={"ground_truth": {"inputs": ["21"], "outputs": ["42"]}},
            )
        ]
    )
    assert state.reward is not None and state.reward["score"] == 1.0


# --- killing the judger -------------------------------------------------------------


async def test_the_program_cannot_kill_its_supervisor_and_killing_itself_kills_only_the_sample() -> None:
    # the supervisor is pid 1 of the sandbox's PID namespace and takes no signal from inside it:
    # the kills are dropped and both tests run to the end (the old design crashed the sample here)
    program = (
        "import os, signal\n"
        "for pid in (os.getppid(), 1):\n"
        "    try:\n"
        "        signal.pidfd_send_signal(os.pidfd_open(pid), 9)\n"
        "    except OSError:\n"
        "        pass\n"
        "print('alive')\n"
    )
    out = await score_async(
        fenced(program), {"inputs": ["", ""], "outputs": ["alive", "alive"]}, limits=LIMITS
    )
    assert out["score"] == 1.0 and out["passed"] == 2
    out = await score_async(
        fenced(
            UNHOOKED
            + "unhooked('import os\\nfor p in range(1, 200):\\n    try: os.kill(p, 9)\\n'"
            + "'    except OSError: pass')\nprint('alive')"
        ),
        {"inputs": [""], "outputs": ["alive"]},
        limits=ESCAPE,
    )
    assert out["score"] == 0.0
    await judger_still_works()


def test_one_reward_request_cannot_take_the_server_down() -> None:
    import httpx

    from judger.server.app import create_app
    from judger.testing import serve_asgi

    killer = (
        "import os, signal\n"
        "for pid in (os.getppid(), 1):\n"
        "    try:\n"
        "        signal.pidfd_send_signal(os.pidfd_open(pid), 9)\n"
        "    except OSError:\n"
        "        pass\n"
        "print(4)\n"  # a wrong answer: the kills above change nothing either way
    )
    tests = {"inputs": ["1 2"], "outputs": ["3"]}
    with serve_asgi(create_app(CodeJudgerConfig(wall_s=5, cpu_s=5))) as server:
        reply = httpx.post(
            server.url + "/reward", json={"response": fenced(killer), "label": tests}, timeout=60
        )
        assert reply.status_code == 200 and reply.json()["score"] == 0.0
        assert httpx.get(server.url + "/health", timeout=5).status_code == 200
        good = fenced("print(sum(map(int, input().split())))")
        reply = httpx.post(server.url + "/reward", json={"response": good, "label": tests}, timeout=60)
        assert reply.status_code == 200 and reply.json()["score"] == 1.0


# --- escaping and outliving the judge ------------------------------------------------


async def test_a_new_session_child_dies_with_the_sample_and_reaches_nothing(tmp_path: Path) -> None:
    mark = f"judger-escape-{secrets.token_hex(6)}"
    sock_path = tmp_path / "host.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(sock_path))
    listener.listen()
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind(f"\0{mark}")
    abstract.listen()
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    for s in (listener, abstract, tcp):
        s.settimeout(0.1)
    payload = (
        "import os, socket, time\n"
        "report = []\n"
        f"for target, family in (({str(sock_path)!r}, socket.AF_UNIX), ('\\0{mark}', socket.AF_UNIX),"
        f" (('127.0.0.1', {tcp.getsockname()[1]}), socket.AF_INET)):\n"
        "    try:\n"
        "        s = socket.socket(family); s.settimeout(1); s.connect(target); report.append('connected')\n"
        "    except OSError as e:\n"
        "        report.append(type(e).__name__)\n"
        f"for path in ({str(tmp_path / 'written')!r}, '/usr/{mark}', '/{mark}'):\n"
        "    try:\n"
        "        open(path, 'w').write('x'); report.append('wrote')\n"
        "    except OSError as e:\n"
        "        report.append(type(e).__name__)\n"
        "print(' '.join(report), flush=True)\n"
        "os.close(1)\n"
        f"time.sleep(60)  # {mark}\n"
    )
    program = (
        UNHOOKED + f"print(unhooked({payload!r}, wait=False) or 'started')\nimport time\ntime.sleep(1)\n"
    )
    # the unhooked child keeps running in its own session when the sample ends
    start = time.monotonic()
    text, _ = await stdout_of(program + f"print(unhooked({payload!r}).strip())\n", ESCAPE)
    try:
        assert time.monotonic() - start < 30
        assert "connected" not in text and "wrote" not in text, text
        assert "started" in text  # the escape itself ran: what held it was the kernel
        for s in (listener, abstract, tcp):
            with pytest.raises(OSError):
                s.accept()
    finally:
        for s in (listener, abstract, tcp):
            s.close()
    time.sleep(0.3)
    assert processes_with(mark.encode()) == []
    assert not (tmp_path / "written").exists() and not os.path.exists(f"/usr/{mark}")
    assert not os.path.exists(f"/{mark}")
    await judger_still_works()


def _count_processes() -> int:
    return sum(entry.isdigit() for entry in os.listdir("/proc"))


@pytest.mark.serial  # counts every process of the machine, as a bomb's need not descend from us
async def test_no_new_process_by_default_and_fork_bombs_are_bounded() -> None:
    # RLIMIT_NPROC alone let this bomb reach 6,500 processes when the judge runs as root (the
    # kernel never applies it to root, and the sandbox's uid is root outside its namespace)
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    spawn = UNHOOKED + "print(unhooked('print(1)'))"
    text, outcome = await stdout_of(spawn)
    assert outcome.status == "error" and "Operation not permitted" in outcome.detail, (text, outcome)
    threads = (
        "import threading\nseen = []\n"
        "workers = [threading.Thread(target=seen.append, args=(i,)) for i in range(8)]\n"
        "[w.start() for w in workers]\n[w.join() for w in workers]\nprint(sum(seen))"
    )
    assert (await stdout_of(threads))[0].strip() == "28"  # threads still start
    assert (await stdout_of(spawn, ESCAPE))[0].strip() == "1"  # unless subprocesses are allowed
    peak = [0]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _count_processes())
            time.sleep(0.02)

    base = _count_processes()
    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for program in (bomb, UNHOOKED + f"unhooked({bomb!r}, wait=False)\nimport time\ntime.sleep(2)"):
            out = await score_async(fenced(program), {"inputs": [""], "outputs": ["never"]}, limits=LIMITS)
            assert out["score"] == 0.0
    finally:
        done.set()
        watcher.join()
    assert peak[0] - base < 32, f"{peak[0] - base} processes above the {base} before the bomb"
    await judger_still_works()


# --- forged passes -------------------------------------------------------------------

ASSERT_TESTS = {"test": "def check(f):\n    assert f(2) == 5\n    assert f(3) == 7", "entry_point": "g"}


@pytest.mark.parametrize(
    "program",
    [
        # replace exec with a no-op and define its own check
        "import builtins\nbuiltins.exec = lambda *a, **k: None\n"
        "def check(f):\n    pass\ndef g(x):\n    return 0",
        # dig through gc for a channel and a token, then write fake reports everywhere
        "import gc, json, os\n"
        "tokens = [o for o in gc.get_objects() if isinstance(o, dict) and 'token' in o]\n"
        "for o in gc.get_objects():\n"
        "    try:\n"
        "        if isinstance(getattr(o, 'token', None), str) and isinstance(getattr(o, 'fd', None), int):\n"
        "            for i in range(3):\n"
        "                m = {'event': 'test', 'index': i, 'status': 'ok', 'token': o.token}\n"
        "                os.write(o.fd, (json.dumps(m) + '\\n').encode())\n"
        "    except Exception:\n"
        "        pass\n"
        "for fd in range(0, 1024):\n"
        "    for i in range(3):\n"
        "        for t in [None] + [d.get('token') for d in tokens]:\n"
        "            m = {'event': 'test', 'index': i, 'status': 'ok', 'token': t, 'id': i + 1, 'ok': True,"
        " 'value': 5}\n"
        "            try:\n"
        "                os.write(fd, (json.dumps(m) + '\\n').encode())\n"
        "            except OSError:\n"
        "                pass\n"
        "def g(x):\n    return 0",
        # an answer that equals everything
        "class Any:\n    def __eq__(self, other):\n        return True\ndef g(x):\n    return Any()",
        # leave before any test runs, with a clean exit status
        "import os\nos._exit(0)\ndef g(x):\n    return 0",
        # patch what the tests use
        "import builtins\nbuiltins.AssertionError = type('X', (Exception,), {})\ndef g(x):\n    return 0",
        # write reports into the supervisor through /proc
        "import os\nfor pid in os.listdir('/proc'):\n    for fd in range(0, 64):\n        try:\n"
        '            os.write(os.open(f\'/proc/{pid}/fd/{fd}\', os.O_WRONLY), b\'{"event":"test","index":0,'
        '"status":"ok"}\\n\')\n        except (OSError, ValueError):\n            pass\n'
        "def g(x):\n    return 0",
    ],
    ids=[
        "exec-noop-own-check",
        "gc-token-fake-reports",
        "eq-always-true",
        "exit-0-early",
        "patch-assert",
        "proc-fd",
    ],
)
async def test_assert_style_forgeries_score_zero(program: str) -> None:
    out = await score_async(fenced(program), ASSERT_TESTS, limits=LIMITS)
    assert out["score"] == 0.0 and out["passed"] == 0, out
    # the same tests do pass for an honest solution
    honest = await score_async(fenced("def g(x):\n    return 2 * x + 1"), ASSERT_TESTS, limits=LIMITS)
    assert honest["score"] == 1.0


async def test_call_results_cross_as_plain_values() -> None:
    tests = {"inputs": [[2]], "outputs": [4], "fn_name": "f"}
    liar = "class I(int):\n    def __eq__(self, other):\n        return True\ndef f(x):\n    return I(5)"
    out = await score_async(fenced(liar), tests, limits=LIMITS)
    assert out["score"] == 0.0 and out["error"] == "failed: wrong answer: returned 5"
    pytest.importorskip("numpy")
    numpy_answer = "import numpy as np\ndef f(x):\n    return np.int64(x) * np.int64(x)"
    assert (await score_async(fenced(numpy_answer), tests, limits=LIMITS))["score"] == 1.0


async def test_expected_outputs_are_nowhere_in_the_sandbox() -> None:
    secret = f"EXPECTED-{secrets.token_hex(8)}"
    hunter = (
        "import os, re, time\n"
        "P = rb'EXPECTED-[0-9a-f]{16}'\n"
        "stop = time.time() + 3.5\n"
        "def hunt():\n"
        "    pids = [str(os.getppid())] + [p for p in os.listdir('/proc') if p.isdigit()]\n"
        "    for pid in pids:\n"
        "        for name in ('environ', 'cmdline'):\n"
        "            try:\n"
        "                yield from re.findall(P, open(f'/proc/{pid}/{name}', 'rb').read())\n"
        "            except OSError:\n"
        "                pass\n"
        "        try:\n"
        "            maps = open(f'/proc/{pid}/maps').read().splitlines()\n"
        "            mem = open(f'/proc/{pid}/mem', 'rb', buffering=0)\n"
        "        except OSError:\n"
        "            continue\n"
        "        for line in maps:\n"
        "            if ' rw' not in line or time.time() > stop:\n"
        "                continue\n"
        "            lo, hi = (int(x, 16) for x in line.split()[0].split('-'))\n"
        "            for at in range(lo, hi, 1 << 20):\n"
        "                try:\n"
        "                    mem.seek(at)\n"
        "                    yield from re.findall(P, mem.read(min(1 << 20, hi - at)))\n"
        "                except (OSError, OverflowError, MemoryError, ValueError):\n"
        "                    break\n"
        "    for root, dirs, files in os.walk('/tmp'):\n"
        "        for f in files:\n"
        "            try:\n"
        "                yield from re.findall(P, open(os.path.join(root, f), 'rb').read(1 << 20))\n"
        "            except OSError:\n"
        "                pass\n"
        "print(next(hunt(), b'nothing').decode())\n"
    )
    tests = {"inputs": ["1"], "outputs": [secret]}
    out = await score_async(fenced(hunter), tests, limits=LIMITS)
    assert out["score"] == 0.0
    out = await score_async(fenced(UNHOOKED + f"print(unhooked({hunter!r}))"), tests, limits=ESCAPE)
    assert out["score"] == 0.0


async def test_a_sibling_samples_output_is_invisible() -> None:
    answer = secrets.token_hex(8)
    tests = {"inputs": [answer], "outputs": [answer[::-1]]}
    honest = (
        "import time\ns = input()\nprint(s[::-1])\nopen('out_0.txt', 'w').write(s[::-1])\ntime.sleep(1.5)"
    )
    copier = (
        "import glob, time\n"
        "deadline = time.time() + 3\n"
        "while time.time() < deadline:\n"
        "    for path in glob.glob('/tmp/judger-sandbox-*/out_*') + glob.glob('/tmp/*/out_*'):\n"
        "        try:\n"
        "            text = open(path).read().strip()\n"
        "        except OSError:\n"
        "            continue\n"
        f"        if len(text) == 16 and text != {''!r}:\n"
        "            print(text); raise SystemExit\n"
        "    time.sleep(0.05)\n"
    )
    judger = CodeJudgerConfig(wall_s=8, cpu_s=8, max_parallel=2).build()
    states = [
        RolloutState(response=fenced(honest), reward_model={"ground_truth": tests}),
        RolloutState(response=fenced(copier), reward_model={"ground_truth": tests}),
    ]
    out = await judger.batch_judge(states)
    assert [s.reward["score"] for s in out] == [1.0, 0.0]  # type: ignore[index]


# --- writing outside scratch ---------------------------------------------------------


async def test_writes_through_dir_fds_openers_fifos_and_xattrs_fail() -> None:
    attempts = (
        "import os\n"
        "ok = []\n"
        "def attempt(name, fn):\n"
        "    try:\n        fn(); ok.append(name)\n"
        "    except OSError:\n        pass\n"
        "for d in ('/', '/usr', '/usr/lib', '/opt/judger-sandbox', '/dev', '/proc'):\n"
        "    try:\n        fd = os.open(d, os.O_RDONLY)\n"
        "    except OSError:\n        continue\n"
        "    attempt('dir_fd ' + d, lambda: os.open('judger-pwn', os.O_CREAT | os.O_WRONLY, dir_fd=fd))\n"
        "    opener = lambda p, f: os.open(p, f, dir_fd=fd)\n"
        "    attempt('opener ' + d, lambda: open('judger-pwn', 'w', opener=opener))\n"
        "    attempt('mkfifo ' + d, lambda: os.mkfifo('judger-fifo', dir_fd=fd))\n"
        "    attempt('mkdir ' + d, lambda: os.mkdir('judger-dir', dir_fd=fd))\n"
        "jd = os.open('/opt/judger-sandbox', os.O_RDONLY)\n"
        "attempt('unlink', lambda: os.unlink('supervisor.py', dir_fd=jd))\n"
        "attempt('rename', lambda: os.rename('worker.py', 'w2.py', src_dir_fd=jd, dst_dir_fd=jd))\n"
        "attempt('rename-out', lambda: os.rename('wire.py', '/tmp/wire.py', src_dir_fd=jd))\n"
        "attempt('setxattr', lambda: os.setxattr('/opt/judger-sandbox/wire.py', 'user.pwn', b'1'))\n"
        "attempt('chmod', lambda: os.chmod('/usr/bin', 0o777))\n"
        "attempt('symlink', lambda: os.symlink('/tmp', '/usr/judger-link'))\n"
        "print(' | '.join(ok) or 'none')\n"
    )
    for program, limits in ((attempts, LIMITS), (UNHOOKED + f"print(unhooked({attempts!r}))", ESCAPE)):
        text, _ = await stdout_of(program, limits)
        assert text.strip().splitlines()[-1] == "none", text
    for path in (
        "/judger-pwn",
        "/usr/judger-pwn",
        "/usr/lib/judger-pwn",
        "/usr/judger-link",
        "/dev/judger-fifo",
    ):
        assert not os.path.lexists(path)
    assert set(os.listdir(bwrap.INSIDE_DIR)) >= {"supervisor.py", "wire.py", "worker.py"}


# --- memory and disk limits ----------------------------------------------------------


async def test_memfd_and_sysv_shared_memory_are_refused() -> None:
    memfd = (
        "import os\n"
        "held = []\n"
        "for _ in range(20):\n"
        "    fd = os.memfd_create('x')\n"
        "    os.ftruncate(fd, 12 << 20)\n"
        "    os.pwrite(fd, b'x' * (12 << 20), 0)\n"
        "    held.append(fd)\n"
        "print('held')\n"
    )
    small = SandboxLimits(wall_s=5.0, cpu_s=5.0, memory_mb=192, output_mb=16, scratch_mb=64)
    out = await score_async(fenced(memfd), {"inputs": [""], "outputs": ["held"]}, limits=small)
    assert out["score"] == 0.0 and "Operation not permitted" in out["error"], out
    shm = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "ids = [libc.shmget(0, 60 << 20, 0o1600), libc.msgget(0, 0o1600)]\n"
        "print('held' if max(ids) >= 0 else 'refused')\n"
    )
    text, _ = await stdout_of(UNHOOKED + f"print(unhooked({shm!r}))", ESCAPE)
    assert text.strip() == "refused"


async def test_scratch_has_a_total_size_and_stdout_is_capped_at_the_pipe() -> None:
    fill = (
        "import os\n"
        "total = 0\n"
        "for i in range(200):\n"
        "    with open(f'fill_{i}', 'wb') as f:\n"
        "        f.write(b'x' * (8 << 20))\n"
        "    total += 8\n"
        "print('filled', total)\n"
    )
    out = await score_async(fenced(fill), {"inputs": [""], "outputs": ["filled 1600"]}, limits=LIMITS)
    assert out["score"] == 0.0 and "No space left" in out["error"], out
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    flood = "import sys\nblock = 'x' * (1 << 20)\nfor _ in range(100):\n    sys.stdout.write(block)\n"
    out = await score_async(fenced(flood), {"inputs": [""], "outputs": ["x"]}, limits=LIMITS)
    assert out["score"] == 0.0 and "output size limit exceeded" in out["error"], out
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 2 * LIMITS.output_mb + 16


# --- reading what it should not ------------------------------------------------------


async def test_the_hosts_secrets_are_out_of_reach(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = f"SECRET_TOKEN_VALUE_{secrets.token_hex(8)}"
    monkeypatch.setenv("SECRET_TOKEN", secret)
    snoop = (
        "import json, os\n"
        "seen = {'env': dict(os.environ)}\n"
        "for pid in os.listdir('/proc'):\n"
        "    if pid.isdigit() or pid == 'self':\n"
        "        for name in ('environ', 'cmdline'):\n"
        "            try:\n                raw = open(f'/proc/{pid}/{name}', 'rb').read()\n"
        "                seen[f'{pid}/{name}'] = raw.decode('latin-1')\n"
        "            except OSError as e:\n                seen[f'{pid}/{name}'] = type(e).__name__\n"
        "seen['ppid_cmdline'] = open(f'/proc/{os.getppid()}/cmdline', 'rb').read().decode('latin-1')\n"
        "for path in ('/etc/passwd', '/etc/shadow', '/root/.bash_history'):\n"
        "    try:\n        seen[path] = open(path).read()\n"
        "    except OSError as e:\n        seen[path] = type(e).__name__\n"
        "seen['/root'] = os.listdir('/root') if os.path.isdir('/root') else []\n"
        "seen['/'] = sorted(os.listdir('/'))\n"
        "print(json.dumps(seen))\n"
    )
    for program, limits in ((snoop, LIMITS), (UNHOOKED + f"print(unhooked({snoop!r}))", ESCAPE)):
        text, _ = await stdout_of(program, limits)
        seen = json.loads(text.strip().splitlines()[-1])
        assert secret not in text
        assert seen["/etc/passwd"] == "FileNotFoundError" and seen["/etc/shadow"] == "FileNotFoundError"
        assert set(seen["/root"]) <= {".pyenv"}  # only the Python installation the sandbox runs
        assert not {"etc", "home", "run", "var", "srv", "mnt"} & set(seen["/"]), seen["/"]
        assert "pytest" not in seen["ppid_cmdline"]  # the parent is the sandbox's supervisor
    out = await score_async(
        fenced(snoop + "raise ValueError(json.dumps(seen))"), {"inputs": [""], "outputs": [""]}, limits=LIMITS
    )
    assert out["score"] == 0.0 and secret not in out["error"] and "root:x:0:0" not in out["error"]


# --- every one of them in one batch, then the judger still serves --------------------------------


@pytest.mark.slow
async def test_a_batch_of_hostile_programs_fails_them_alone() -> None:
    judger = CodeJudgerConfig(wall_s=3, cpu_s=3, timeout=60).build()
    hostile = [
        "import os, signal\nsignal.pidfd_send_signal(os.pidfd_open(os.getppid()), 9)",
        UNHOOKED
        + "unhooked('import os\\nwhile True:\\n    os.fork()', wait=False)\nimport time\ntime.sleep(1)",
        "import os\nos.memfd_create('x')",
        "open('/etc/passwd').read()",
        "while True:\n    pass",
    ]
    good = "print(int(input()) + 1)"
    tests = {"inputs": ["1", "2"], "outputs": ["2", "3"]}
    states = [
        RolloutState(response=fenced(p), reward_model={"ground_truth": tests}) for p in [*hostile, good]
    ]
    out = await asyncio.wait_for(judger.batch_judge(states), 120)
    scores = [s.reward["score"] if s.reward else None for s in out]
    assert scores == [0.0] * len(hostile) + [1.0], [(s.status, s.error_msg, s.reward) for s in out]
    assert all(s.status != Status.FAILED for s in out)
    await judger_still_works()


def test_a_judger_without_isolation_refuses_to_build(monkeypatch: pytest.MonkeyPatch) -> None:
    bwrap.probe.cache_clear()
    monkeypatch.setattr(bwrap.shutil, "which", lambda name: None)
    try:
        with pytest.raises(bwrap.IsolationUnavailable, match="apt-get install -y bubblewrap") as caught:
            CodeJudgerConfig().build()
        assert "isolation='none-unsafe'" in str(caught.value)
        CodeJudgerConfig(isolation="none-unsafe").build()  # the weaker mode only when asked by name
    finally:
        bwrap.probe.cache_clear()
    with pytest.raises(ValueError, match="isolation"):
        SandboxLimits(isolation="none")  # type: ignore[arg-type]


_ = threading  # the module is imported for helpers in other tests
