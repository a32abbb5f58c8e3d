"""`judger score`."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of `judger score`; must stay cheap (no heavy imports here)."""


def run(args: argparse.Namespace) -> int:
    raise SystemExit("judger score: not implemented yet")
