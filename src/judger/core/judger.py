"""The judger contract: ``BaseJudger`` and the payload-based ``Judger``.

``Judger`` splits judging into ``preprocess`` (pick the few fields scoring needs), ``judge_payload``
(turn a payload into an output dict; the only part that may run elsewhere) and ``postprocess``
(write the reward back). Around that contract this module adds what every judger gets for free:
a deadline per call, output validation, and per-sample failure capture.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from functools import partial
from typing import Any, ClassVar, Literal, NamedTuple, TypeVar, cast

from judger.core.batching import MicroBatcher, dedup
from judger.core.deadlines import judge_deadline
from judger.core.errors import JudgerOutputError, JudgeTimeoutError
from judger.core.failure import JudgeFailure, mark_failed
from judger.core.outputs import check_output
from judger.core.rollout import RolloutState, write_reward

JudgerPayload = dict[str, Any]
"""What ``preprocess`` makes of one state for ``judge_payload``: a small dict, the only part of a
sample that travels to a worker process, a Ray actor or a server."""
JudgerPayloadBatch = JudgerPayload | list[JudgerPayload]
"""One payload, or the list ``batch_judge`` hands a batched ``judge_payload``."""
JudgerOutput = dict[str, Any]
"""What ``judge_payload`` returns for one payload: the reward dict, with a finite numeric ``score``."""
JudgerOutputBatch = JudgerOutput | list[JudgerOutput]
"""One output, or a list of them in the payloads' order."""
OnError = Literal["fail", "raise"]
PayloadResult = JudgerOutput | JudgeFailure
"""What running one payload gives: its validated output, or the failure that replaced it."""

T = TypeVar("T")
logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_CONCURRENCY = 64


def _check_policy(on_error: str, timeout: float, max_concurrency: int) -> None:
    if on_error not in ("fail", "raise"):
        raise ValueError(f"on_error must be 'fail' or 'raise', got {on_error!r}")
    if not (isinstance(timeout, (int, float)) and timeout > 0):
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if not (isinstance(max_concurrency, int) and max_concurrency >= 1):
        raise ValueError(f"max_concurrency must be an integer >= 1, got {max_concurrency!r}")


async def maybe_await(value: T | Awaitable[T]) -> T:
    if inspect.isawaitable(value):
        return await value
    return value


class BaseJudger(ABC):
    """The minimal interface: judge one state, or a batch of them, asynchronously.

    ``on_error="fail"`` (the default) turns any failure into ``status=FAILED`` plus ``error_msg``
    on that one sample; ``on_error="raise"`` propagates the exception (XTuner's behaviour).
    ``timeout`` is the deadline, in seconds, of every judge call.
    """

    def __init__(
        self,
        judger_name: str | None = None,
        *,
        on_error: OnError = "fail",
        timeout: float = DEFAULT_TIMEOUT,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    ) -> None:
        _check_policy(on_error, timeout, max_concurrency)
        self.judger_name = judger_name or type(self).__name__
        self.on_error: OnError = on_error
        self.timeout = float(timeout)
        self.max_concurrency = max_concurrency

    lowest_score: float | None = None
    """The lowest score this judger gives a sample (None: not declared). A trainer that needs a
    number for a sample the judger could not score gives it this one by default
    (:class:`~judger.core.failure_reward.FailureReward`), so that a response which makes the judge
    fail never earns more than a wrong answer. ``build()`` sets it from the config
    (:meth:`JudgerConfig.score_floor`)."""

    def get_judger_name(self) -> str:
        return self.judger_name

    def lowest_score_for(self, rollout_state: RolloutState) -> float | None:
        """The lowest score this judger gives ``rollout_state`` (a composed judger answers for the
        branch the sample routes to); None when not declared."""
        return self.lowest_score

    @abstractmethod
    async def judge(self, rollout_state: RolloutState) -> RolloutState: ...

    async def batch_judge(self, rollout_states: list[RolloutState]) -> list[RolloutState]:
        """Judge concurrently, at most ``max_concurrency`` at a time, keeping the input order."""
        return await gather_bounded([partial(self.judge, s) for s in rollout_states], self.max_concurrency)

    def capture(self, state: RolloutState, exc: BaseException) -> RolloutState:
        """Apply the ``on_error`` policy to a failure of ``state``: mark it, or re-raise."""
        if self.on_error == "raise":
            raise exc
        return mark_failed(state, JudgeFailure.from_exception(exc, self.judger_name))

    async def aclose(self) -> None:
        """Release what the judger holds (HTTP clients, threads, actors). Safe to call twice."""

    def close(self) -> None:
        """Synchronous :meth:`aclose`, for scripts without an event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(self.aclose())
            return
        raise RuntimeError(f"{self.judger_name}: inside an event loop, use 'await judger.aclose()'")

    async def __aenter__(self: T) -> T:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __enter__(self: T) -> T:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(judger_name={self.judger_name!r})"


class Judger(BaseJudger):
    """A judger written as ``preprocess -> judge_payload -> postprocess``.

    Subclass it and override ``judge_payload`` (and ``preprocess`` / ``postprocess`` as needed).
    Only the payload ever crosses to a Ray actor, a worker process or a composed branch, so keep it
    small and picklable. ``judge_payload`` receives one payload (a dict) or a list of them and
    returns one output or a list of the same length.
    """

    # --- capabilities: the shortcuts the batch driver may take ------------------------------------
    #
    # Each is a plain class attribute, read by :func:`batch_plan` (the one place that picks a batch
    # path) and by ``run_payloads``. A shortcut skips a hook, so overriding that hook withdraws it:
    # a class that defines a hook listed in ``capability_hooks`` without declaring the capability
    # again in its own body gets False, and so does an instance that is given the hook.

    plain_postprocess: bool = True
    """``postprocess`` only writes the output as the reward: the driver writes the rewards itself,
    without a call per sample."""
    unique_payloads: bool = True
    """``_dedup_key`` is None for every payload: ``run_payloads`` skips the dedup pass."""
    judges_states: bool = False
    """:meth:`judge_states` scores a batch of states in a pass of its own (a scorer cheaper than a
    payload per sample; a composition's grouping), writing what the payload path writes."""
    plain_batch_judge: bool = True
    """``batch_judge`` is this driver: a composition may then judge the payloads of its samples
    itself, with those of the other branches; False: it hands them to ``batch_judge`` whole."""
    delegates_hooks: bool = False
    """``preprocess`` and ``postprocess`` only call those of ``self.local`` (a judger that runs the
    payloads elsewhere): the driver calls those directly, with their shortcuts."""
    capability_hooks: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "plain_postprocess": ("postprocess",),
        "unique_payloads": ("_dedup_key",),
        "judges_states": ("preprocess", "postprocess"),
        "plain_batch_judge": ("batch_judge",),
        "delegates_hooks": ("preprocess", "postprocess"),
    }
    """Each capability and the hooks it skips (a subclass extends the mapping with its own)."""
    _withdrawn_by: ClassVar[dict[str, tuple[str, ...]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = vars(cls)
        withdrawn: dict[str, list[str]] = {}
        for capability, hooks in cls.capability_hooks.items():
            for hook in hooks:
                withdrawn.setdefault(hook, []).append(capability)
            if capability not in own and not own.keys().isdisjoint(hooks):
                setattr(cls, capability, False)
        cls._withdrawn_by = {hook: tuple(caps) for hook, caps in withdrawn.items()}

    def __setattr__(self, name: str, value: Any) -> None:
        # a hook given to one instance (judger.postprocess = fn) withdraws, on that instance, the
        # shortcuts that would skip it
        for capability in self._withdrawn_by.get(name, ()):
            object.__setattr__(self, capability, False)
        object.__setattr__(self, name, value)

    def preprocess(self, rollout_state: RolloutState) -> JudgerPayload:
        reward_model = rollout_state.reward_model
        return {
            "response": rollout_state.response,
            "label": reward_model.get("ground_truth") if reward_model else None,
            "message": rollout_state.message,
            "status": rollout_state.status,
            "data_source": rollout_state.data_source,
            "task_name": rollout_state.task_name,
        }

    async def judge_payload(self, payload: JudgerPayloadBatch) -> JudgerOutputBatch:
        # not abstract: a driver-side Judger that only overrides preprocess/postprocess (XTuner's
        # RemoteJudger(preprocess_judger=...)) must be constructible
        raise NotImplementedError(f"{type(self).__name__}.judge_payload() is not implemented.")

    def postprocess(
        self, rollout_state: RolloutState, output: JudgerOutput
    ) -> RolloutState | Awaitable[RolloutState]:
        write_reward(rollout_state, output)
        return rollout_state

    # --- running payloads: deadlines, validation, dedup, isolation --------------------------------
    #
    # One direction only: the public runners (``run_payload``, ``run_payloads``, ``judge``,
    # ``batch_judge``) call the one protected batch method ``_judge_batch``; for a user subclass its
    # default calls the user's ``judge_payload``. Built-ins (:class:`BatchJudger`) implement
    # ``_judge_batch`` instead and derive ``judge_payload`` from the runners.

    micro_batch_window_s: float | None = None
    """Single ``judge()`` calls that arrive together (same event-loop turn, or within this many
    seconds) run as one ``run_payloads`` call; None: each runs alone. Set by judgers whose per-call
    cost is high (Ray actors, worker processes); used only with ``on_error="fail"``."""

    def _dedup_key(self, payload: JudgerPayload) -> Hashable | None:
        """Payloads of one batch with equal keys are judged once; None (the default): never merged."""
        return None

    async def _judge_batch(self, payloads: list[JudgerPayload]) -> list[Any]:
        """The batch method: one output (or the exception or JudgeFailure in its place) per payload.

        The default serves a user subclass: one ``judge_payload`` call with the whole list under the
        deadline; if it raises (and ``on_error`` is "fail"), each payload is retried on its own so
        that one bad sample cannot fail the rest; subclasses that cannot take lists are served by the
        same path. A batch call that overruns the deadline fails every sample in it with a timeout.
        """
        if len(payloads) == 1:
            return [await self._run_one_raw(payloads[0])]
        try:
            async with judge_deadline(self.judger_name, self.timeout, f"batch of {len(payloads)}"):
                outputs = await self.judge_payload(list(payloads))
        except JudgeTimeoutError as err:
            if self.on_error == "raise":
                raise
            return [err] * len(payloads)
        except Exception:
            if self.on_error == "raise":
                raise
            return await gather_bounded(
                [partial(self._run_one_raw, p) for p in payloads], self.max_concurrency
            )
        if isinstance(outputs, list) and len(outputs) == len(payloads):
            return outputs
        shape_error: Exception
        if not isinstance(outputs, list):
            shape_error = TypeError(
                f"judger {self.judger_name!r}: judge_payload returned {type(outputs).__name__} for a "
                f"batch of {len(payloads)} payloads; return a list of output dicts"
            )
        else:
            shape_error = ValueError(
                f"judger {self.judger_name!r}: judge_payload returned {len(outputs)} outputs for "
                f"{len(payloads)} payloads"
            )
        if self.on_error == "raise":
            raise shape_error
        # a judge_payload written for one payload at a time: each sample gets its own call, and
        # fails alone (with its own reason) if that does not work either
        _warn_once(self, f"{shape_error}; judging each payload on its own instead")
        return await gather_bounded([partial(self._run_one_raw, p) for p in payloads], self.max_concurrency)

    async def run_payload(self, payload: JudgerPayload) -> JudgerOutput:
        """One payload's validated output; its failure raises."""
        async with judge_deadline(self.judger_name, self.timeout):
            output = await self.judge_payload(payload)
        if isinstance(output, list):
            raise TypeError(
                f"judger {self.judger_name!r}: judge_payload returned a list for a single payload; "
                "return one output dict"
            )
        return check_output(output, self.judger_name)

    async def run_payloads(self, payloads: Sequence[JudgerPayload]) -> list[PayloadResult]:
        """Run a batch; each entry is that payload's validated output or its failure.

        Payloads with equal :meth:`_dedup_key` are judged once (each sample still gets its own
        output dict); ``on_error="raise"`` raises the first failure instead.
        """
        if not payloads:
            return []
        if self.unique_payloads:  # no key: nothing to merge
            unique, slots = list(payloads), None
        else:
            unique, slots = dedup(payloads, self._dedup_key)
        raw = await self._judge_batch(unique)
        if len(raw) != len(unique):
            raise ValueError(f"judger {self.judger_name!r}: {len(raw)} results for {len(unique)} payloads")
        if slots is None:
            return self._capture_all(raw)
        results = self._capture_all([raw[slot] for slot in slots])
        # each sample gets its own dict: postprocess may write into it
        return [r if isinstance(r, JudgeFailure) else dict(r) for r in results]

    async def _run_one_raw(self, payload: JudgerPayload) -> Any:
        try:
            return await self.run_payload(payload)
        except Exception as exc:
            if self.on_error == "raise":
                raise
            return exc

    def _single_batcher(self) -> MicroBatcher[JudgerPayload, PayloadResult] | None:
        window = self.micro_batch_window_s
        if window is None or self.on_error != "fail":
            return None
        batcher: MicroBatcher[JudgerPayload, PayloadResult] | None = self.__dict__.get("_micro_batcher")
        if batcher is None or batcher.window_s != window:
            batcher = MicroBatcher(self.run_payloads, window_s=window)
            self.__dict__["_micro_batcher"] = batcher
        return batcher

    def _capture_all(self, raw: list[Any]) -> list[PayloadResult]:
        """:meth:`capture_result` of each, with the common case -- a dict whose score, if any, is a
        finite float -- checked inline: at batch sizes of thousands the call per sample shows."""
        out: list[PayloadResult] = []
        append = out.append
        isfinite = math.isfinite
        for i, result in enumerate(raw):
            if type(result) is dict:
                score = result.get("score", 0.0)
                if type(score) is float and isfinite(score):
                    append(result)
                    continue
            append(self.capture_result(result, i))
        return out

    def capture_result(self, result: Any, index: int) -> PayloadResult:
        """A raw result of payload ``index`` -- an output, or the exception (or JudgeFailure) in its
        place -- as a validated output or a JudgeFailure (or raised, with ``on_error="raise"``)."""
        if isinstance(result, JudgeFailure):
            if self.on_error == "raise":
                raise result.to_exception()
            return result
        if isinstance(result, BaseException):
            if self.on_error == "raise":
                raise result
            return JudgeFailure.from_exception(result, self.judger_name)
        return self._check_captured(result, index)

    def _check_captured(self, output: Any, index: int) -> PayloadResult:
        try:
            return check_output(output, self.judger_name, index)
        except JudgerOutputError as exc:
            if self.on_error == "raise":
                raise
            return JudgeFailure.from_exception(exc, self.judger_name)

    # --- the public entry points -----------------------------------------------------------------

    async def judge(self, rollout_state: RolloutState) -> RolloutState:
        try:
            payload = self.preprocess(rollout_state)
        except Exception as exc:
            return self.capture(rollout_state, exc)
        batcher = self._single_batcher()
        if batcher is not None:
            result: PayloadResult = await batcher.submit(payload)
        else:
            try:
                result = await self.run_payload(payload)
            except Exception as exc:
                return self.capture(rollout_state, exc)
        written = self._finish_now(rollout_state, result)
        if isinstance(written, RolloutState) or not inspect.isawaitable(written):
            return written
        return await written

    async def batch_judge(self, rollout_states: list[RolloutState]) -> list[RolloutState]:
        """The batch driver: the judger's own pass over the states where it declares one
        (:attr:`judges_states`), else preprocess all -> judge the payloads -> write all."""
        if batch_plan(self).states_pass:
            await self.judge_states(rollout_states)
        else:
            await judge_payloads(self, rollout_states)
        return rollout_states

    async def judge_states(self, rollout_states: list[RolloutState]) -> None:
        """Judge ``rollout_states`` in place, in a pass of the judger's own; the driver calls it
        for a judger that declares :attr:`judges_states`. The default is the payload path."""
        await judge_payloads(self, rollout_states)

    def _finish_now(
        self, state: RolloutState, result: PayloadResult, policy: BaseJudger | None = None
    ) -> RolloutState | Awaitable[RolloutState]:
        # one result written back: postprocess for an output, the failure policy (``policy``'s:
        # this judger's, or the composition's it judges for) otherwise; an awaitable only for an
        # async postprocess, so judge and batch_judge pay no coroutine each
        policy = policy or self
        if isinstance(result, JudgeFailure):
            if policy.on_error == "raise":
                raise result.to_exception()
            return mark_failed(state, result)
        try:
            written = self.postprocess(state, result)
        except Exception as exc:
            return policy.capture(state, exc)
        if isinstance(written, RolloutState) or not inspect.isawaitable(written):
            return written
        return _finish_async(policy, state, written)


async def _finish_async(
    policy: BaseJudger, state: RolloutState, written: Awaitable[RolloutState]
) -> RolloutState:
    try:
        return await written
    except Exception as exc:
        return policy.capture(state, exc)


class BatchPlan(NamedTuple):
    """How the driver judges a batch, picked from the judger's capabilities by :func:`batch_plan`."""

    states_pass: bool
    """The judger's own :meth:`~Judger.judge_states` pass."""
    own_pass: bool
    """``batch_judge`` is more than preprocess -> payloads -> write: a composition hands such a
    branch its samples whole rather than judging their payloads with the others'."""
    hooks: Judger
    """The judger whose ``preprocess`` and ``postprocess`` the payload path calls."""
    plain_writes: bool
    """Write each output as the reward, without calling ``postprocess``."""


def batch_plan(judger: Judger) -> BatchPlan:
    """The one place a batch path is chosen, from the capabilities the judger declares."""
    hooks = judger
    while hooks.delegates_hooks:
        hooks = cast(Judger, hooks.local)  # type: ignore[attr-defined]
    states_pass = judger.judges_states
    return BatchPlan(states_pass, states_pass or not judger.plain_batch_judge, hooks, hooks.plain_postprocess)


async def judge_payloads(
    judger: Judger, states: list[RolloutState], policy: BaseJudger | None = None
) -> None:
    """The payload path: each state's payload made by ``preprocess``, all of them judged by one
    ``run_payloads`` call, each result written back (by ``postprocess``, or plainly when that only
    writes the reward). Failures are captured by ``policy``'s ``on_error`` (the judger's own, or the
    composition's that judges for it)."""
    policy = policy or judger
    plan = batch_plan(judger)
    payloads: list[JudgerPayload] = []
    owners: list[RolloutState] = []
    preprocess = plan.hooks.preprocess
    for state in states:
        try:
            payloads.append(preprocess(state))
            owners.append(state)
        except Exception as exc:
            policy.capture(state, exc)
    results = await judger.run_payloads(payloads)
    if plan.plain_writes:
        # the default postprocess, without its two calls per sample
        for state, result in zip(owners, results):
            if type(result) is dict:
                write_reward(state, result)
            else:
                judger._finish_now(state, result, policy)
        return
    for state, result in zip(owners, results):
        written = judger._finish_now(state, result, policy)
        if not isinstance(written, RolloutState) and inspect.isawaitable(written):
            await written  # an async postprocess: the rest of its work


class BatchJudger(Judger):
    """Base of the built-in judgers: they implement :meth:`_judge_batch` (and may override
    ``run_payload`` with a cheaper single path); ``judge_payload`` -- the user-facing contract that
    XTuner's actors call -- is derived from those, so calls only ever go one way."""

    @abstractmethod
    async def _judge_batch(self, payloads: list[JudgerPayload]) -> list[Any]: ...

    async def run_payload(self, payload: JudgerPayload) -> JudgerOutput:
        (result,) = await self._judge_batch([payload])
        if isinstance(result, JudgeFailure):
            raise result.to_exception()
        if isinstance(result, BaseException):
            raise result
        return check_output(result, self.judger_name)

    async def judge_payload(self, payload: JudgerPayloadBatch) -> JudgerOutputBatch:
        if not isinstance(payload, list):
            return await self.run_payload(payload)
        results = await self.run_payloads(payload)
        for result in results:
            if isinstance(result, JudgeFailure):
                raise result.to_exception()
        return results  # type: ignore[return-value]


def _warn_once(judger: BaseJudger, message: str) -> None:
    if not judger.__dict__.get("_batch_shape_warned"):
        judger.__dict__["_batch_shape_warned"] = True
        logger.warning(message)


async def gather_bounded(factories: Sequence[Callable[[], Awaitable[T]]], limit: int) -> list[T]:
    """Await ``factories[i]()`` for every i with at most ``limit`` running; results in input order.

    A fixed set of worker coroutines pulls indices, so a batch of 100k costs ``limit`` tasks, not
    100k of them.
    """
    n = len(factories)
    results: list[Any] = [None] * n
    if n == 0:
        return results
    it = iter(range(n))

    async def worker() -> None:
        for i in it:
            results[i] = await factories[i]()

    workers = min(limit, n)
    if workers == 1:
        await worker()
        return results
    tasks = [asyncio.ensure_future(worker()) for _ in range(workers)]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        # one worker raised (on_error="raise") or we were cancelled: stop the others too
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    return results
