"""The shared worker processes of a command that scores: started early, never left behind.

``judger score``, ``judger eval`` and ``judger view`` score with judgers whose scorers may run on
the shared :class:`~judger.runtime.procpool.pool.ProcessPool`; they start it as soon as the judger
is built (so that its start-up overlaps reading the input) and close it before they exit.
"""

from __future__ import annotations

from typing import Any

from judger.runtime.procpool.shared import (
    close_shared_pool as _close_pool,
)
from judger.runtime.procpool.shared import (
    configure_shared_pool,
    shared_pool,
    shared_pool_options,
)


def uses_pool(judger: Any) -> bool:
    """Whether the judger, or a branch of it (at any depth), scores on the shared worker processes."""
    from judger.judgers.composed import leaf_judgers

    return any(getattr(leaf, "execution", None) == "process" for leaf in leaf_judgers(judger))


def may_use_pool(judger: Any) -> bool:
    """:func:`uses_pool`, counting the routes a router builds on first use (the default routing)."""
    from judger.judgers.composed import all_judgers

    return uses_pool(judger) or any(
        "process" in unbuilt()
        for j in all_judgers(judger)
        if callable(unbuilt := getattr(j, "unbuilt_executions", None))
    )


def start_pools(judger: Any) -> None:
    """Start the shared worker processes now if the judger (or a branch of it) scores on them."""
    if uses_pool(judger):
        shared_pool().start()


def close_shared_pool() -> None:
    """Stop the shared worker processes, if scoring started them (they must not outlive the command)."""
    _close_pool()


def size_process_pool(workers: int) -> None:
    """Size the shared worker-process pool (keeping any other options already configured)."""
    configure_shared_pool(**{**shared_pool_options(), "workers": workers})
