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
