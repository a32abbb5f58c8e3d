"""The process that indexes a whole file for ``judger view``: it reads and scores the file (as
``judger score`` does), saves its index where the server reads it back, and exits.

A process of its own: the server's thread that answers the page is never held up by the reading
and scoring, and the states of the whole file live (and die) in memory that is not the server's.
It reports on stdout, one line a phase, each line ``MARK`` then a JSON object; anything else a
judger prints there is passed on to stderr.

    python -m judger.cli.viewer.worker '{"path": ..., "stem": ..., "rescore": ..., "scoring": {...}}'
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from judger.cli.viewer.index import Progress, RolloutIndex, build_kept
from judger.core.errors import JudgerError

MARK = "judger-view-worker "
# what of `judger view`'s arguments the scoring reads
SCORING_ARGS = ("config", "preset", "compat", "workers", "batch_size")


# the workers running: stopped when the server stops, never left to finish for nobody
_RUNNING: set[subprocess.Popen[str]] = set()


def stop_workers() -> None:
    for proc in list(_RUNNING):
        proc.terminate()
    for proc in list(_RUNNING):
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


atexit.register(stop_workers)


class WorkerError(JudgerError):
    """The worker stopped without an index: its own message, or how it exited."""


def _tell(**fields: Any) -> None:
    print(MARK + json.dumps(fields), flush=True)


def make_scorer(args: argparse.Namespace, progress: Callable[[int], None] | None = None) -> Any:
    """What judges chunk after chunk of states with the judger ``judger score`` would build;
    ``progress`` is told how many more are judged, batch by batch."""
    return ChunkScorer(args, progress)


class ChunkScorer:
    """One judger for every chunk of a file, as ``judger score`` keeps one: built, its pools started
    and its event loop made on the first chunk; :meth:`close` closes them."""

    def __init__(self, args: argparse.Namespace, progress: Callable[[int], None] | None = None) -> None:
        self.args, self.progress = args, progress
        self._judger: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __call__(self, states: list[Any]) -> None:
        from judger.cli import judging
        from judger.cli.pools import start_pools

        if self._judger is None:
            self._loop = asyncio.new_event_loop()
            self._judger = judging.build(self.args)
            start_pools(self._judger)
        assert self._loop is not None
        self._loop.run_until_complete(
            judging.score_states(self._judger, states, self.args.batch_size, self.progress)
        )

    def close(self) -> None:
        from judger.cli.pools import close_shared_pool

        judger, loop = self._judger, self._loop
        self._judger = self._loop = None
        if judger is None or loop is None:
            return
        try:
            loop.run_until_complete(judger.aclose())
        finally:
            close_shared_pool()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()


def work(spec: dict[str, Any]) -> None:
    args = argparse.Namespace(**spec["scoring"])

    def progress(phase: str, count: int) -> None:
        _tell(phase=phase, count=count)

    scorer = make_scorer(args, progress=lambda k: progress("scored", k))
    build_kept(spec["path"], Path(spec["stem"]), scorer=scorer, rescore=spec["rescore"], progress=progress)
    _tell(phase="saved", count=0)


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    try:
        work(spec)
    except Exception as exc:  # a scoring that stopped, a bug in a custom judger: told to the server
        _tell(error=f"{type(exc).__name__}: {exc}")
        return 1
    except KeyboardInterrupt:  # ^C reaches the whole process group: the server says it stopped
        return 130
    return 0


def in_worker(path: Path, scoring: dict[str, Any], rescore: bool) -> Any:
    """A :data:`judger.cli.viewer.live.Builder` that indexes ``path`` in a worker process."""

    def build(stem: Path | None, progress: Progress) -> RolloutIndex:
        if stem is None:
            raise ValueError("a worker needs a folder to keep the index it builds in")
        spec = {"path": str(path), "stem": str(stem), "rescore": rescore, "scoring": scoring}
        src = str(Path(__file__).resolve().parents[3])
        env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
        proc = subprocess.Popen(
            [sys.executable, "-m", "judger.cli.viewer.worker", json.dumps(spec)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        _RUNNING.add(proc)
        try:
            error = _follow(proc, progress)
            code = proc.wait()
        finally:
            _RUNNING.discard(proc)
        if code != 0 or error is not None:
            raise WorkerError(error or f"the indexing process exited with code {code}")
        return RolloutIndex.load(stem)

    return build


def _follow(proc: subprocess.Popen[str], progress: Progress) -> str | None:
    """Pass the worker's reports on to ``progress`` until it exits; its error message, if any."""
    assert proc.stdout is not None
    error = None
    for line in proc.stdout:
        if not line.startswith(MARK):
            print(line, end="", file=sys.stderr)
            continue
        told = json.loads(line[len(MARK) :])
        if "error" in told:
            error = told["error"]
        else:
            progress(told["phase"], told["count"])
    return error


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
