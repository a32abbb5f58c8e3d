"""Processes judger starts are born deaf to Ctrl-C; a Ctrl-C meanwhile still reaches the starter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.py310]  # multiprocessing's internals (the resource tracker), per Python

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


@pytest.mark.parametrize("method", ["spawn", "forkserver", "fork"])
def test_a_process_started_deaf_is_born_with_sigint_blocked_and_the_starter_still_hears_it(
    tmp_path: Path, method: str
) -> None:
    """A fresh interpreter, as a command is: multiprocessing's resource tracker is not running yet,
    and starting it (spawn and forkserver do) unblocks SIGINT in the starting thread."""
    script = tmp_path / "starts.py"
    script.write_text(_STARTS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, str(script), method], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [
        "interrupted after the start",  # the Ctrl-C was held, not lost
        "child born blocked: True",
        "blocked here: False",  # the starter's mask as it was
    ]
