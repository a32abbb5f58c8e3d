"""Killable worker processes: a deadline per call, a stuck worker SIGKILLed and replaced."""

from judger.runtime.procpool.pool import ProcessPool, shared_pool

__all__ = ["ProcessPool", "shared_pool"]
