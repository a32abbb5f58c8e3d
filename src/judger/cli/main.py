"""The ``judger`` command: ``judger score`` (the main job) and ``judger serve``."""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from judger import __version__
from judger.cli import process

# Each subcommand lives in its own module with ``add_parser(subparsers)`` and ``run(args) -> int``;
# modules are imported only when their subcommand runs, so ``judger score`` never loads FastAPI.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "score": ("judger.cli.score", "score a rollouts file (JSONL/Parquet) and report per data_source"),
    "serve": ("judger.cli.serve", "serve a judger config over HTTP"),
    "eval": ("judger.cli.eval", "generate on OpenAI-compatible servers, judge, report per data_source"),
    "view": ("judger.cli.view", "look at rollouts and their rewards in a browser (127.0.0.1)"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; given ``command`` (``"score"``), only that subcommand gets its arguments,
    so only its module is imported (``""``: none, for ``judger --help`` and ``--version``)."""
    parser = argparse.ArgumentParser(prog="judger", description="Score LLM rollouts for RL post-training.")
    parser.add_argument("--version", action="version", version=f"judger {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in SUBCOMMANDS.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        sp.set_defaults(_module=module)
        if command is None or command == name:
            _module(module).add_arguments(sp)
    return parser


def _module(name: str) -> ModuleType:
    return importlib.import_module(name)


def _version() -> str:

    return __version__


def _command(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names: the first word that is not an option (the top level takes no
    option with a value); None, so that every subcommand is built, when it names none we know."""
    word = next((a for a in argv if not a.startswith("-")), "")
    return word if word in SUBCOMMANDS or word == "" else None


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_command(argv))
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    command = _module(args._module)
    if process.owned:
        # What importing allocated (classes, schemas, functions) lives until the process ends:
        # frozen, the cyclic collector no longer scans it on every collection while scoring
        gc.freeze()
        gc.enable()
    return int(command.run(args) or 0)


def entry() -> None:
    """The console script: :func:`main`, then a fast exit.

    A command that scored 100k rows holds millions of objects it is about to drop; tearing them
    down one by one (and the interpreter's final garbage collection) took 0.4-0.8 s after the last
    output. Output is flushed, the worker processes are already closed, so the process ends at
    once. Only here, in the command's own process: :func:`main` stays a plain call for tests.
    """
    process.owned = True
    # no collection while the command imports (main() freezes what it imported, then collects as
    # usual): dozens of collections would scan the same import-time objects, which never die
    gc.disable()
    try:
        code = main()
    except KeyboardInterrupt:
        # Ctrl-C before a command's own handler runs (importing, building the judger): one line, as
        # the command's handler would say it, not a traceback through whatever was importing
        command = _command(sys.argv[1:])
        print(f"judger{' ' + command if command else ''}: interrupted", file=sys.stderr)
        code = 130
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, OSError):
        pass
    if "ray" in sys.modules:
        sys.exit(code)  # Ray's exit hooks disconnect the driver from its cluster cleanly
    os._exit(code)


if __name__ == "__main__":
    entry()
