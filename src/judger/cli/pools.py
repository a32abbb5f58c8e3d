"""The shared worker processes of a command that scores: started early, never left behind.

``judger score``, ``judger eval`` and ``judger view`` score with judgers whose scorers may run on
the shared :class:`~judger.runtime.procpool.pool.ProcessPool`; they start it as soon as the judger
is built (so that its start-up overlaps reading the input) and close it before they exit.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

# judger.runtime.procpool.shared is imported where a pool is asked for: a command whose judger
# scores inline (GSM8K, QA) does not wait for its multiprocessing machinery to import
_SHARED = "judger.runtime.procpool.shared"


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


def start_pools(judger: Any, *, wait: bool = False) -> None:
    """Start the shared worker processes now if the judger (or a branch of it) scores on them, each
    importing first the modules of the reward handlers that run there; ``wait``: return once one
    of them answers (a server is not ready to judge before)."""
    if uses_pool(judger):
        from judger.judgers.composed import leaf_judgers
        from judger.runtime.procpool.shared import shared_pool

        pool = shared_pool()
        for leaf in leaf_judgers(judger):
            pool.preload_in_workers(getattr(getattr(leaf, "placement", None), "modules", ()))
        pool.start()
        if wait:
            # a worker that cannot start fails the samples sent to it, each with the reason
            with contextlib.suppress(Exception):
                pool.run_sync(abs, 0)


def close_shared_pool() -> None:
    """Stop the shared worker processes, if scoring started them (they must not outlive the command)."""
    if _SHARED in sys.modules:  # else no pool was ever made in this process
        sys.modules[_SHARED].close_shared_pool()


def size_process_pool(workers: int) -> None:
    """Size the shared worker-process pool (keeping any other options already configured)."""
    from judger.runtime.procpool.shared import configure_shared_pool, shared_pool_options

    configure_shared_pool(**{**shared_pool_options(), "workers": workers})
