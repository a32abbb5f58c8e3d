"""How the process pool starts: in the background on request, warm, and not for ever when it cannot."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from judger.runtime.procpool import shared
from judger.runtime.procpool.dispatcher import MAX_START_FAILURES
from judger.runtime.procpool.pool import ProcessPool

HERE = Path(__file__).resolve().parent


def test_start_returns_at_once_and_the_workers_come_up_in_the_background() -> None:
    with ProcessPool(1, start_method="spawn", preload=("math_verify",)) as pool:
        assert not pool.started
        began = time.monotonic()
        pool.start()
        assert pool.started
        assert time.monotonic() - began < 0.5  # spawning and importing Math-Verify takes longer
        deadline = time.monotonic() + 60
        while pool.stats()["max_worker_start_s"] is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pool.stats()["max_worker_start_s"] is not None


def test_workers_start_with_the_math_parser_already_built(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", [str(HERE), *sys.path])  # the spawned worker gets our path
    import pool_probe

    # the shared pool's preload grades a few answers, so no sample's deadline builds the parser
    with ProcessPool(1, start_method="spawn", preload=shared.default_preload()) as pool:
        assert pool.run_sync(pool_probe.parser_built)
    with ProcessPool(1, start_method="spawn", preload=("math_verify",)) as pool:
        assert not pool.run_sync(pool_probe.parser_built)  # what the probe tells apart


def test_warming_stops_when_workers_keep_failing_to_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "judger_test_dies_at_import.py").write_text("import os\nos._exit(3)\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])  # the spawned worker gets our path
    with ProcessPool(2, start_method="spawn", preload=("judger_test_dies_at_import",)) as pool:
        pool.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if pool.stats()["workers_started"] >= MAX_START_FAILURES and not pool.worker_pids():
                break
            time.sleep(0.05)
        settled = pool.stats()["workers_started"]
        time.sleep(3.0)  # several worker starts' worth: none may follow once warming gave up
        assert pool.stats()["workers_started"] == settled
        assert MAX_START_FAILURES <= settled <= MAX_START_FAILURES + 2
        assert pool.worker_pids() == []
