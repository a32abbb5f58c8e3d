"""An actor that speaks only XTuner's protocol (``judge_payload.remote(payload)``), made dispatchable.

XTuner's ``RemoteJudger(actor, judger_name, preprocess_judger)`` wraps any actor whose single method
is ``judge_payload``: XTuner's own JudgerActor, a hand-made Ray actor, or a test double whose
``remote`` is a coroutine. judger's dispatcher calls ``run_payload`` / ``run_payloads`` / ``stats``
and awaits ``ref.future()``; this adapter offers those on top of ``judge_payload``, so such an
actor gets the same deadlines, retries, backpressure and failure capture as a JudgerActor.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from judger.core.failure import JudgeFailure
from judger.core.judger import JudgerOutput, JudgerPayload, PayloadResult
from judger.core.outputs import check_output


def speaks_judger_protocol(actor: Any) -> bool:
    """Whether ``actor`` is a judger JudgerActor handle (it has ``run_payloads``)."""
    try:
        return callable(getattr(actor, "run_payloads", None))
    except Exception:  # some handles raise on unknown attributes
        return False


class _Pending:
    """What ``method.remote(...)`` gives the dispatcher: ``future()`` as a Ray ObjectRef has."""

    __slots__ = ("_task",)

    def __init__(self, awaitable: Awaitable[Any]) -> None:
        self._task = asyncio.ensure_future(awaitable)

    def future(self) -> asyncio.Future[Any]:
        return self._task


class _Method:
    __slots__ = ("_fn",)

    def __init__(self, fn: Callable[[Any], Awaitable[Any]]) -> None:
        self._fn = fn

    def remote(self, arg: Any = None) -> _Pending:
        return _Pending(self._fn(arg))


def _unwrap_ray_error(exc: BaseException) -> BaseException:
    cause = getattr(exc, "cause", None)  # RayTaskError carries the actor's own exception
    return cause if isinstance(cause, Exception) else exc


def _lost_actor(exc: BaseException) -> bool:
    """A Ray infrastructure error (the actor died or is unreachable), not the judger's own."""
    try:
        from ray.exceptions import RayError
    except ImportError:  # a test double without Ray installed
        return False
    return isinstance(exc, RayError)


class ForeignActor:
    """``run_payload`` / ``run_payloads`` / ``stats`` over an actor's ``judge_payload.remote``."""

    def __init__(self, actor: Any, judger_name: str) -> None:
        method = getattr(actor, "judge_payload", None)
        if method is None or not callable(getattr(method, "remote", None)):
            raise TypeError(
                f"actor {type(actor).__name__} has no judge_payload.remote(payload): RemoteJudger(actor=...) "
                "takes a judger JudgerActor handle or an actor with XTuner's judge_payload method"
            )
        self.actor = actor
        self.judger_name = judger_name
        self.run_payload = _Method(self._run_payload)
        self.run_payloads = _Method(self._run_payloads)
        self.stats = _Method(self._stats)

    async def _call(self, payload: JudgerPayload) -> Any:
        try:
            return await self.actor.judge_payload.remote(payload)
        except Exception as exc:
            raise _unwrap_ray_error(exc) from None

    async def _run_payload(self, payload: JudgerPayload) -> JudgerOutput:
        output = await self._call(payload)
        if isinstance(output, list):
            raise TypeError(
                f"judger {self.judger_name!r}: the actor's judge_payload returned a list for one payload"
            )
        return check_output(output, self.judger_name)

    async def _run_payloads(self, payloads: list[JudgerPayload]) -> list[PayloadResult]:
        # one call per payload: an XTuner actor's judger need not take lists (NativeJudger does not)
        outcomes = await asyncio.gather(*(self._run_payload(p) for p in payloads), return_exceptions=True)
        results: list[PayloadResult] = []
        for outcome in outcomes:
            if not isinstance(outcome, BaseException):
                results.append(outcome)
            elif isinstance(outcome, Exception) and not _lost_actor(outcome):
                results.append(JudgeFailure.from_exception(outcome, self.judger_name))
            else:
                raise outcome  # the dispatcher retries a lost actor's payloads: not the judger's failure
        return results

    def kill(self, *, restart: bool) -> None:
        """Kill the wrapped actor when it is a Ray actor (so that Ray restarts it on a hang)."""
        from judger.remote.cluster import kill_actor

        kill_actor(self.actor, restart=restart)

    async def _stats(self, _: Any = None) -> dict[str, Any]:
        return {"judger_name": self.judger_name, "foreign": type(self.actor).__name__}
