"""Processes judger starts are born deaf to Ctrl-C and ignore it (fork servers from their first
import); a Ctrl-C meanwhile still reaches the starter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]  # multiprocessing's internals, per Python

_STARTS = """
import multiprocessing as mp, os, signal, sys
from judger.runtime.procpool.forkserver import started_deaf

def born_blocked(conn):
    conn.send(signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, []))

def interrupt_self():
    os.kill(os.getpid(), signal.SIGINT)  # a Ctrl-C while the process starts

if __name__ == "__main__":
    ctx = mp.get_context(sys.argv[1])
    here, there = ctx.Pipe()  # a pipe, not a queue: a queue's lock would start the resource tracker
    process = ctx.Process(target=born_blocked, args=(there,))
    try:
        started_deaf(lambda: (process.start(), interrupt_self()))
    except KeyboardInterrupt:
        print("interrupted after the start")
    process.join()
    print("child born blocked:", here.recv())
    print("blocked here:", signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, []))
"""


def _run(tmp_path: Path, script: str, *args: str) -> list[str]:
    """The lines ``script`` prints, run as a fresh interpreter (as a command is)."""
    path = tmp_path / "script.py"
    path.write_text(script)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, str(path), *args]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


@pytest.mark.parametrize("method", ["spawn", "forkserver", "fork"])
def test_a_process_started_deaf_is_born_with_sigint_blocked_and_the_starter_still_hears_it(
    tmp_path: Path, method: str
) -> None:
    """A fresh interpreter, as a command is: multiprocessing's resource tracker is not running yet,
    and starting it (spawn and forkserver do) unblocks SIGINT in the starting thread."""
    assert _run(tmp_path, _STARTS, method) == [
        "interrupted after the start",  # the Ctrl-C was held, not lost
        "child born blocked: True",
        "blocked here: False",  # the starter's mask as it was
    ]


_SLOW_PRELOAD = """
import os, pathlib, time
pathlib.Path(os.environ["PRELOAD_STARTED"]).touch()
time.sleep(1.5)  # a preload as slow as Math-Verify's warm-up
"""


def test_ctrl_c_while_a_fork_server_imports_its_preload_does_not_kill_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C reaches the whole process group, a fork server too: during a slow preload it must not
    die with a traceback under the command's one-line message."""
    import signal
    import time

    from judger.runtime.procpool.forkserver import start_fork_server, stop_fork_server

    (tmp_path / "slow_preload.py").write_text(_SLOW_PRELOAD)
    # the server's sys.path comes from its environment (Python before 3.13 ignores the caller's)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), *sys.path]))
    started = tmp_path / "started"
    monkeypatch.setenv("PRELOAD_STARTED", str(started))
    server = start_fork_server(["slow_preload"])
    pid = server._forkserver_pid
    try:
        deadline = time.monotonic() + 60
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert started.exists()
        os.kill(pid, signal.SIGINT)  # in the middle of the preload
        time.sleep(2.0)  # the preload is done
        assert os.waitpid(pid, os.WNOHANG) == (0, 0)  # the server lives
        assert "KeyboardInterrupt" not in capfd.readouterr().err
    finally:
        stop_fork_server(server)


_FORKED_CHILD = """
import multiprocessing as mp, signal, sys
from judger.runtime.procpool.forkserver import server_preload

def handler():
    return repr(signal.getsignal(signal.SIGINT))

if __name__ == "__main__":
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(server_preload(["json"], shared=sys.argv[1] == "shared"))
    with ctx.Pool(1) as pool:
        print(pool.apply(handler))
"""


@pytest.mark.parametrize(("server", "handler"), [("shared", "default_int_handler"), ("own", "SIG_IGN")])
def test_what_a_fork_server_forks_gets_the_ctrl_c_handler_of_its_kind(
    tmp_path: Path, server: str, handler: str
) -> None:
    """multiprocessing's process-wide server ignores SIGINT only while it imports its preload: what
    it forks (another program's processes too: judger's pool sets its preload) still raises
    KeyboardInterrupt on Ctrl-C. What a server of judger's own forks ignores it from its start."""
    assert handler in _run(tmp_path, _FORKED_CHILD, server)[-1]
