"""A fork server started by one process, adopted by its children for their pools' workers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]  # multiprocessing's internals, per Python

HERE = Path(__file__).resolve().parent


def _run(kind: str, adopt: bool) -> dict[str, Any]:
    # a fresh process: forking is safe there (one thread), and its fork server is its own
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    done = subprocess.run(
        [sys.executable, str(HERE / "fork_server_child.py"), kind, "adopt" if adopt else "own"],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("kind", ["fork", "forkserver"])
def test_a_child_adopting_the_server_gets_workers_forked_from_it(kind: str) -> None:
    report = _run(kind, adopt=True)
    assert report["adopted"]
    assert report["worker_parent"] == report["server"]  # not a server of the child's own
    assert report["imported_in"] == report["server"]  # the preload was imported once, there
    assert report["exitcode"] == 0
    # stopped: killed and reaped (its socket file gone), not left to tear down an interpreter
    assert not report["server_alive"] and not report["socket_left"]


def test_a_child_that_does_not_adopt_it_starts_a_server_of_its_own() -> None:
    report = _run("fork", adopt=False)
    assert not report["adopted"]
    assert report["worker_parent"] != report["server"]
    assert report["imported_in"] != report["server"]


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
    script = tmp_path / "child.py"
    script.write_text(_FORKED_CHILD)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, str(script), server], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert handler in done.stdout
