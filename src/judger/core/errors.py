"""Every exception judger raises, in one tree. Each message names the judger, field or sample it
concerns and, where there is one, the fix.

    JudgerError
     +-- ConfigError (ValueError)          a judger or config cannot be found or built
     |    +-- OutputConflict               `judger eval -o` names another run's file (or a foreign one)
     +-- NoResponseError (ValueError)      a sample with a null response: nothing to judge
     +-- RoutingError                      a data_source no branch of a ComposedJudger takes
     +-- InputError (ValueError)           an input file as a whole cannot be read
     |    +-- FileChanged                  `judger view`'s file changed since it was indexed
     +-- JudgeTimeoutError (TimeoutError)  a judge call overran its deadline
     +-- JudgerOutputError (TypeError)     a judger returned something that is not a reward dict
     +-- HandlerHTTPError                  a URL reward handler gave up (URL and last status)
     |    +-- HandlerHTTPTimeout (TimeoutError)
     +-- VerdictParseError                 an LLM grader replied without a readable verdict
     +-- RemoteError                       a worker's exception that could not cross as itself
     +-- InputTooLargeError (ValueError)   a call too large for a worker process
     +-- WorkerCrashedError (RuntimeError) a worker process died during a call
     +-- ThreadBudgetError (RuntimeError)  every thread a sync handler may use is held by a hung call
     +-- PoolClosedError (RuntimeError)    the worker pool closed before the call finished
     +-- ReplicaLostError                  a Ray actor died on every attempt the budget allowed
     +-- GenerationError                   a model server could not answer a generation request
     +-- ReplyError                        a server's reply refused while read or parsed
     |    +-- ReplyTooLarge                over its size cap, on the wire or once decoded
     +-- IsolationUnavailable (RuntimeError) bubblewrap cannot run here: code judging refuses to build
     +-- SandboxStartError (RuntimeError)  a sandbox did not come up (a judge failure, never a score)
     +-- SandboxFusionError (RuntimeError) a SandboxFusion server could not run a test
     +-- BodyError (ValueError)            the HTTP server refuses a request body (carries the status)
     +-- WorkerError                       `judger view`'s indexing process stopped without an index
     +-- IndexUnavailable                  `judger view` has no index yet, or its indexing failed

The classes live beside the code that raises them; this drawing is kept whole by
``tests/core/test_error_tree.py``.

Errors that are also a builtin type (ValueError, TypeError, TimeoutError) subclass it too, so
``except ValueError`` around a config still works. A failed *sample* is not an exception: it is
``status=FAILED`` with ``error_msg`` (see :mod:`judger.core.failure`); these reach the caller only
with ``on_error="raise"`` or at build time.
"""

from __future__ import annotations


class JudgerError(Exception):
    """Base class of judger's own errors."""


class ConfigError(JudgerError, ValueError):
    """A judger or config could not be found or built; the message says what to change."""


class NoResponseError(JudgerError, ValueError):
    """A sample with nothing to judge: its response is null (or missing, which reads as null).

    The sample FAILS with this reason: scored, a missing answer would earn a wrong one's reward.
    """

    def __init__(self, field: str = "response") -> None:
        super().__init__(f"nothing to judge: the {field} is null")


class RoutingError(JudgerError):
    """``data_source`` cannot be routed, or needs a merge_fn there is none of: a configuration error.

    Raised whatever ``on_error`` says, as the seed raises it: a bad route is not a failure of one
    sample's answer and must not turn into a FAILED sample that training silently skips.
    """

    def __str__(self) -> str:
        # KeyError's str() would quote the whole message
        return str(self.args[0]) if self.args else ""


class InputError(JudgerError, ValueError):
    """The input as a whole cannot be read: missing file, unknown format, broken Parquet."""


class JudgeTimeoutError(JudgerError, TimeoutError):
    """A judge call overran its deadline."""

    def __init__(
        self, judger_name: str, timeout: float, detail: str = "", *, message: str | None = None
    ) -> None:
        self.judger_name = judger_name
        self.timeout = timeout
        extra = f" ({detail})" if detail else ""
        super().__init__(
            message or f"timeout: judger {judger_name!r} did not finish within {timeout:g} s{extra}"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_timeout, (type(self), self.judger_name, self.timeout, str(self)))


def _rebuild_timeout(
    cls: type[JudgeTimeoutError], name: str, timeout: float, message: str
) -> JudgeTimeoutError:
    return cls(name, timeout, message=message)


class JudgerOutputError(JudgerError, TypeError):
    """A judger returned something that is not a valid reward dict."""


class HandlerHTTPError(JudgerError):
    """A URL reward handler gave up: the message names the URL and the last status or error."""


class HandlerHTTPTimeout(HandlerHTTPError, TimeoutError):
    """A URL reward handler's request timed out (counted as a timeout, not an error)."""


class VerdictParseError(JudgerError):
    """The grader replied, but no verdict could be read from the reply (a judge failure)."""


class GenerationError(JudgerError):
    """A generation request that could not be answered (after retries, or not retryable)."""
