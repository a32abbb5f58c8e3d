"""Judged samples counted into the server's metrics, and the failure each reply describes.

Labels are server facts: the judger's own name(s) and outcome; nothing a client posted.
"""

from __future__ import annotations

from typing import Any

from judger.core.failure import JudgeFailure, failure_of
from judger.core.rollout import RolloutState, Status
from judger.server.metrics import ServerMetrics


def failure_dict(state: RolloutState, judger_name: str) -> dict[str, str] | None:
    """The failure of ``state`` as a reply carries it (judger, kind, message), or None."""
    failure = failure_of(state, judger_name)
    return (
        None
        if failure is None
        else {"judger": failure.judger, "kind": failure.kind, "message": failure.message}
    )


class Recorder:
    """Counts judged samples into ``metrics`` under the judger's name."""

    def __init__(self, metrics: ServerMetrics, judger_name: str) -> None:
        self.metrics = metrics
        self.judger_name = judger_name

    def record(self, state: RolloutState) -> dict[str, str] | None:
        failure = failure_dict(state, self.judger_name)
        if failure is not None:
            self.metrics.sample(failure["judger"], failure["kind"])
        else:
            verdict = state.reward.get("verdict") if state.reward else None
            self.metrics.sample(self.judger_name, "ok", verdict)
        return failure

    def record_outputs(self, outputs: list[Any]) -> list[dict[str, Any]]:
        """``/judge``'s light answers (reward, status, error_msg) for raw judger outputs -- a dict,
        or the exception of a failed sample -- counted as :meth:`record_many` counts states."""
        out: list[dict[str, Any]] = []
        plain_ok = 0
        for output in outputs:
            if type(output) is dict:
                out.append({"reward": output, "status": "completed", "error_msg": None})
                if "verdict" in output:
                    self.metrics.sample(self.judger_name, "ok", output["verdict"])
                else:
                    plain_ok += 1
            else:
                failure = JudgeFailure.from_exception(output, self.judger_name)
                out.append({"reward": None, "status": "failed", "error_msg": failure.message})
                self.metrics.sample(failure.judger, failure.kind)
        if plain_ok:
            self.metrics.sample(self.judger_name, "ok", n=plain_ok)
        return out

    def record_many(self, states: list[RolloutState]) -> list[dict[str, str] | None]:
        """:meth:`record` for a batch: successes without a verdict are counted once, together."""
        failures: list[dict[str, str] | None] = []
        plain_ok = 0
        for state in states:
            if state.status is not Status.FAILED and not (state.reward and "verdict" in state.reward):
                plain_ok += 1
                failures.append(None)
            else:
                failures.append(self.record(state))
        if plain_ok:
            self.metrics.sample(self.judger_name, "ok", n=plain_ok)
        return failures
