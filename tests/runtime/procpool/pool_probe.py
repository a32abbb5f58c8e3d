"""Functions the pool tests run in workers (imported there from this folder, put on sys.path)."""

from __future__ import annotations


def parser_built() -> bool:
    """Whether this process has built Math-Verify's extraction configs (the parser's first use)."""
    from judger.scorers.math import grade

    return grade._configs.cache_info().currsize == 1


IMPORTED_IN = __import__("os").getpid()
"""The process that imported this module: a fork server's preload is imported there, not in each worker."""


def where() -> tuple[int, int]:
    """``(the process that imported this module, this process's parent)``."""
    import os

    return IMPORTED_IN, os.getppid()
