"""`judger view`: look at rollouts and their rewards in a browser.

Any file ``judger score`` reads is indexed on the server (:mod:`judger.cli.viewer.index`) and paged to
the page (:mod:`judger.cli.viewer.app`) on 127.0.0.1. Rewards already in the file are shown as they
are; samples without one are scored on the way in by the default config, ``--preset`` or ``-c``
(given explicitly, those score every sample again, as ``judger score`` does).

The page is served at once, from the first rows (:mod:`judger.cli.viewer.live`), while a worker
process (:mod:`judger.cli.viewer.worker`) indexes the whole file; the index is kept
(:mod:`judger.cli.viewer.cache`), so the same file opens again at once.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import sys
from pathlib import Path
from typing import Any

_EPILOG = """\
examples:
  judger view scored.jsonl                    rewards already in the file (judger score -o)
  judger view rollouts.jsonl --preset math    score on the way in, then show
  judger view default.jsonl verl.jsonl        the samples whose verdict differs between two files
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of `judger view`; must stay cheap (no heavy imports here)."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = _EPILOG
    parser.add_argument("input", help="rollouts (any layout `judger score` reads), scored or not")
    parser.add_argument("other", nargs="?", help="a second file to compare verdicts against")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("-c", "--config", metavar="CONFIG", help="score with this config (as judger score)")
    which.add_argument("--preset", metavar="NAME", help="score with this preset (as judger score)")
    parser.add_argument("--compat", choices=("verl",), help="score with the default config in verl mode")
    parser.add_argument("--workers", type=int, metavar="N", help="as judger score")
    parser.add_argument("--batch-size", type=int, default=256, metavar="B", help="as judger score")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--no-browser", action="store_true", help="print the URL, do not open a browser")
    parser.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="keep the indexes of the files opened here, to open them again at once "
        "(default: $XDG_CACHE_HOME/judger/view, else ~/.cache/judger/view)",
    )
    parser.add_argument("--no-cache", action="store_true", help="keep no index once the viewer exits")


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def free_socket(port: int = 0) -> socket.socket:
    """A listening socket on 127.0.0.1 (never another interface)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    return sock


def _check_file(path: str) -> str | None:
    """Why ``path`` cannot be viewed, said before the server starts; None when it can be read."""
    target = Path(path)
    if not target.exists():
        return f"{target}: no such file"
    if target.is_dir():
        return f"{target}: is a directory, not a rollouts file"
    return None


def _check_config(args: argparse.Namespace) -> str | None:
    """A config or preset that cannot be built, said before the server starts."""
    from judger.cli import judging
    from judger.presets.loading import ConfigError

    if args.compat and (args.config or args.preset):
        return "--compat applies to the default config only (drop -c / --preset)"
    if args.config or args.preset:
        try:
            judging.build(args)
        except ConfigError as exc:
            return str(exc)
    return None


def plan_indexing(args: argparse.Namespace, paths: list[str]) -> list[tuple[Any, Any]]:
    """A :class:`LiveIndex` per file, and the job that fills it (see judger.cli.viewer.live)."""
    from judger.cli.viewer.cache import IndexCache, scoring_key
    from judger.cli.viewer.live import IndexJob, LiveIndex
    from judger.cli.viewer.worker import SCORING_ARGS, in_worker

    explicit = bool(args.config or args.preset or args.compat)
    if args.no_cache:
        cache = IndexCache.temporary()
    else:
        cache, warning = IndexCache.open(Path(args.cache_dir) if args.cache_dir else None)
        if warning:
            _say(f"judger view: {warning}")
    scoring = {name: getattr(args, name) for name in SCORING_ARGS}
    key = scoring_key(args.config, args.preset, args.compat, explicit)
    return [
        (
            LiveIndex(path),
            IndexJob(Path(path), in_worker(Path(path), scoring, explicit), explicit, cache, key),
        )
        for path in paths
    ]


def _index_once_serving(server: Any, plan: list[tuple[Any, Any]]) -> None:
    """Start indexing once the server answers: the page is served first, not after the imports and
    reading of the indexing (they share the interpreter)."""
    import threading
    import time

    from judger.cli.viewer.live import IndexUnavailable, index_in_background

    def begin() -> None:
        while not server.started and not server.should_exit:
            time.sleep(0.01)
        for live, job in plan:
            index_in_background(live, job)
            # the first file's first rows before the second's: the page shows the first file first
            with contextlib.suppress(IndexUnavailable):
                live.current(timeout=10)

    threading.Thread(target=begin, name="start indexing", daemon=True).start()


def _tell_when_indexed(indexes: list[Any]) -> None:
    """What the terminal shows once each file is indexed: its unreadable rows, the samples scored on
    the way in, or why its indexing stopped."""
    import threading

    def tell(live: Any) -> None:
        if not live.wait():
            _say(f"judger view: {live.error}")
            return
        index = live.current()
        for error in index.errors[:20]:
            _say(f"{index.path}: {error}")
        if index.summary["bad_rows"] > 20:
            _say(f"{index.path}: ... and {index.summary['bad_rows'] - 20} more bad rows")
        if live.cached:
            _say(f"{index.path}: its index kept from an earlier judger view")
        elif index.scored:
            _say(f"{index.path}: scored {index.scored} samples on the way in")

    for live in indexes:
        threading.Thread(target=tell, args=(live,), daemon=True).start()


def run(args: argparse.Namespace) -> int:
    paths = [p for p in (args.input, args.other) if p is not None]
    problem = next((p for p in map(_check_file, paths) if p), None) or _check_config(args)
    if problem:
        _say(f"judger view: {problem}")
        return 2
    try:
        sock = free_socket(args.port)
    except OSError as exc:
        _say(f"judger view: cannot listen on 127.0.0.1:{args.port}: {exc}")
        return 2
    import uvicorn

    from judger.cli.viewer.app import create_app
    from judger.cli.viewer.worker import stop_workers

    plan = plan_indexing(args, paths)
    indexes = [live for live, _ in plan]
    app = create_app(indexes[0], indexes[1] if len(indexes) > 1 else None)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    _index_once_serving(server, plan)
    _tell_when_indexed(indexes)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    print(f"judger view: {url}", flush=True)
    if not args.no_browser:
        import webbrowser

        webbrowser.open(url)
    try:
        server.run(sockets=[sock])
    finally:
        stop_workers()
    return 0
