"""Killable worker processes: a deadline per call, a stuck worker SIGKILLed and replaced."""

from judger.runtime.procpool.pool import ProcessPool
from judger.runtime.procpool.shared import (
    close_shared_pool,
    configure_shared_pool,
    shared_pool,
    shared_pool_options,
)

__all__ = ["ProcessPool", "close_shared_pool", "configure_shared_pool", "shared_pool", "shared_pool_options"]
