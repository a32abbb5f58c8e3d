"""A judge failure as data: what went wrong for one sample, small enough to cross processes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from judger.core.errors import JudgerError, JudgeTimeoutError
from judger.core.rollout import RolloutState, Status

FailureKind = Literal["error", "timeout"]


@dataclass(frozen=True, slots=True)
class JudgeFailure:
    """Why one sample could not be judged. ``message`` is ``"<ExceptionType>: <text>"``."""

    judger: str
    kind: FailureKind
    message: str

    @classmethod
    def from_exception(cls, exc: BaseException, judger_name: str) -> JudgeFailure:
        kind: FailureKind = "timeout" if isinstance(exc, TimeoutError) else "error"
        text = str(exc)
        if kind == "timeout" and "timeout" not in text.lower():
            text = f"timeout: {text}" if text else "timeout"
        prefix = f"{type(exc).__name__}: "
        # an exception rebuilt from a JudgeFailure already carries its type name
        return cls(judger=judger_name, kind=kind, message=text if text.startswith(prefix) else prefix + text)

    def to_exception(self) -> Exception:
        # the message already starts with the original exception's type name
        if self.kind == "timeout":
            return JudgeTimeoutError(self.judger, 0.0, message=self.message)
        return JudgerError(f"judger {self.judger!r}: {self.message}")


def mark_failed(state: RolloutState, failure: JudgeFailure) -> RolloutState:
    """Record a failure on the state: FAILED, no reward, the message, and its kind for counting."""
    state.status = Status.FAILED
    state.reward = None
    state.error_msg = failure.message
    state.extra_fields["judge_failure"] = {"judger": failure.judger, "kind": failure.kind}
    return state


def failure_of(state: RolloutState, judger_name: str = "") -> JudgeFailure | None:
    """What :func:`mark_failed` recorded on a FAILED state (None for any other status); a state
    failed elsewhere, without the record, reads as an error of ``judger_name``."""
    if state.status is not Status.FAILED:
        return None
    info = state.extra_fields.get("judge_failure")
    info = info if isinstance(info, dict) else {}
    kind: FailureKind = "timeout" if info.get("kind") == "timeout" else "error"
    return JudgeFailure(
        judger=str(info.get("judger", judger_name)), kind=kind, message=state.error_msg or "judging failed"
    )
