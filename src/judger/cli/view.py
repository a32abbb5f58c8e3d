"""`judger view`: look at rollouts and their rewards in a browser.

Any file ``judger score`` reads is indexed on the server (:mod:`judger.cli.view_index`) and paged to
the page (:mod:`judger.cli.view_app`) on 127.0.0.1. Rewards already in the file are shown as they
are; samples without one are scored on the way in by the default config, ``--preset`` or ``-c``
(given explicitly, those score every sample again, as ``judger score`` does).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
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


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def make_scorer(args: argparse.Namespace) -> Any:
    """A function that judges a list of states with the judger ``judger score`` would build."""
    from judger.cli import score
    from judger.cli.pools import close_shared_pool, start_pools

    def scorer(states: list[Any]) -> None:
        judger = score.build(args)
        start_pools(judger)

        async def main() -> None:
            try:
                await score.score_states(judger, states, args.batch_size)
            finally:
                await judger.aclose()
                close_shared_pool()

        asyncio.run(main())

    return scorer


def free_socket(port: int = 0) -> socket.socket:
    """A listening socket on 127.0.0.1 (never another interface)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    return sock


def run(args: argparse.Namespace) -> int:
    from judger.cli.loading import ConfigError
    from judger.cli.view_index import RolloutIndex
    from judger.trainer.io import InputError

    if args.compat and (args.config or args.preset):
        _say("judger view: --compat applies to the default config only (drop -c / --preset)")
        return 2
    explicit = bool(args.config or args.preset or args.compat)
    scorer = make_scorer(args)
    try:
        indexes = [
            RolloutIndex(path, scorer=scorer, rescore=explicit)
            for path in [args.input, args.other]
            if path is not None
        ]
    except (InputError, ConfigError) as exc:
        _say(f"judger view: {exc}")
        return 2
    except Exception as exc:  # a judger with on_error="raise", or a bug in a custom judger
        _say(f"judger view: scoring stopped: {type(exc).__name__}: {exc}")
        return 2
    for index in indexes:
        for error in index.errors[:20]:
            _say(f"{index.path}: {error}")
        if index.scored:
            _say(f"{index.path}: scored {index.scored} samples on the way in")
    import uvicorn

    from judger.cli.view_app import create_app

    app = create_app(indexes[0], indexes[1] if len(indexes) > 1 else None)
    try:
        sock = free_socket(args.port)
    except OSError as exc:
        _say(f"judger view: cannot listen on 127.0.0.1:{args.port}: {exc}")
        return 2
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    print(f"judger view: {url}", flush=True)
    if not args.no_browser:
        import webbrowser

        webbrowser.open(url)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    server.run(sockets=[sock])
    return 0
