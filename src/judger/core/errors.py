"""Exceptions judger raises, each naming the judger (and the sample index) it concerns."""

from __future__ import annotations


class JudgerError(Exception):
    """Base class of judger's own errors."""


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
