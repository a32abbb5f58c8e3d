"""Functions the pool tests run in workers (imported there from this folder, put on sys.path)."""

from __future__ import annotations


def parser_built() -> bool:
    """Whether this process has built Math-Verify's extraction configs (the parser's first use)."""
    from judger.scorers.math import grade

    return grade._configs.cache_info().currsize == 1
