"""The process pool's exceptions (a worker's own unpicklable exception is :class:`RemoteError`)."""

from __future__ import annotations

from judger.core.errors import JudgerError
from judger.runtime.procpool.worker import RemoteError

__all__ = ["InputTooLargeError", "PoolClosedError", "RemoteError", "WorkerCrashedError"]


class InputTooLargeError(JudgerError, ValueError):
    """A call's pickled arguments exceed the pool's ``max_input_bytes``; it never reached a worker."""


class WorkerCrashedError(JudgerError, RuntimeError):
    """The worker process died while running the call (segfault, out of memory, ``os._exit``)."""


class PoolClosedError(JudgerError, RuntimeError):
    """The pool was closed before the call finished."""
