"""NativeJudger: judge with a plain reward function, an async function, or an HTTP endpoint."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from judger.core.deadlines import judge_deadline
from judger.core.errors import JudgerOutputError
from judger.core.judger import (
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_TIMEOUT,
    BatchJudger,
    JudgerOutput,
    JudgerPayload,
    OnError,
)
from judger.core.outputs import check_output
from judger.core.rollout import RolloutState
from judger.judgers.execution import Execution, resolve_execution, say_threads
from judger.judgers.handlers import RewardHandler, resolve_handler
from judger.runtime.executors.base import Call, Executor, Needs, spread
from judger.runtime.executors.pick import Setting, pick_executor
from judger.runtime.threads import DEFAULT_MAX_HUNG, HandlerThreads


class NativeJudger(BatchJudger):
    """Score each rollout with ``reward_handler(response=, label=, extra_info=) -> dict``.

    The handler may be a sync function (run off the event loop: in a worker process killed at its
    deadline when a worker can load it, else on worker threads; see :mod:`judger.judgers.execution`),
    an async function (awaited), an ``"package.module:function"`` import string, or an HTTP URL
    (``POST {"response", "label", "extra_info"}`` -> JSON object, through one pooled client with
    retries). ``extra_info`` given to the handler is a fresh dict every call: the judger's static
    ``extra_info`` overlaid with the sample's ``extra_fields["extra_info"]`` when it has one.

    ``batch_judge`` calls a batch-capable handler (see :func:`judger.batch_handler`) once with
    lists; any other handler is called per sample, ``max_concurrency`` at a time, each sample under
    its own deadline, so one slow or failing sample never holds up or fails the rest.
    """

    def __init__(
        self,
        judger_name: str = "native_judger",
        reward_handler: Callable[..., Any] | str | None = None,
        extra_info: dict[str, Any] | None = None,
        request_timeout: float = 30.0,
        *,
        on_error: OnError = "fail",
        timeout: float = DEFAULT_TIMEOUT,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        batched: bool | None = None,
        handler_kwargs: dict[str, Any] | None = None,
        max_retries: int = 3,
        num_threads: int | None = None,
        execution: Execution = "auto",
        max_hung_threads: int = DEFAULT_MAX_HUNG,
    ) -> None:
        super().__init__(judger_name, on_error=on_error, timeout=timeout, max_concurrency=max_concurrency)
        self.handler: RewardHandler = resolve_handler(reward_handler, batched=batched, kwargs=handler_kwargs)
        self.reward_handler = reward_handler
        self.extra_info = dict(extra_info or {})
        self.request_timeout = request_timeout
        self.num_threads = num_threads or min(32, (os.cpu_count() or 1) + 4)
        if max_hung_threads < 0:
            raise ValueError(f"max_hung_threads must be >= 0, got {max_hung_threads}")
        self.max_hung_threads = max_hung_threads
        self.placement = resolve_execution(self.judger_name, self.handler, execution, self.extra_info)
        # "process" or "thread" for a sync handler ("auto": the event loop); why threads, if chosen
        self.execution, self.thread_reason = self.placement.execution, self.placement.thread_reason
        self._worker_checked = False  # a worker has loaded the handler (see _check_worker)
        if self.execution == "process":
            self.micro_batch_window_s = 0.0  # concurrent judge() calls share pool hand-offs
        self._setting = Setting(
            self.judger_name,
            limit=max_concurrency,
            raise_errors=on_error == "raise",
            num_threads=self.num_threads,
            max_hung=max_hung_threads,
            modules=self.placement.modules,
            request_timeout=request_timeout,
            max_retries=max_retries,
        )
        self._executor: Executor = pick_executor(self._needs(), self._setting)

    # --- payload contract ------------------------------------------------------------------------

    def preprocess(self, rollout_state: RolloutState) -> JudgerPayload:
        reward_model = rollout_state.reward_model
        payload: JudgerPayload = {
            "response": rollout_state.response,
            "label": reward_model.get("ground_truth") if reward_model else None,
        }
        if self.handler.signature == "verl":
            payload["data_source"] = rollout_state.data_source
        sample_info = rollout_state.extra_fields.get("extra_info")
        if sample_info:
            payload["extra_info"] = sample_info
        return payload

    # --- execution -------------------------------------------------------------------------------

    def _extra_info(self, payload: JudgerPayload) -> dict[str, Any]:
        sample_info = payload.get("extra_info")
        return {**self.extra_info, **sample_info} if sample_info else {**self.extra_info}

    def _args(self, payload: JudgerPayload) -> tuple:
        return self.handler.call_args(
            payload.get("response"),
            payload.get("label"),
            payload.get("data_source"),
            self._extra_info(payload),
        )

    def _needs(self) -> Needs:
        # a sync handler placed in processes may hang there; one on threads was declared safe (or
        # no worker could load it, which the build said)
        return Needs(kind=self.handler.kind, may_hang=self.execution == "process")

    def _thread_pool(self) -> HandlerThreads:
        """The thread budget of a handler run on threads."""
        from judger.runtime.executors.thread import ThreadExecutor

        executor = self._executor
        assert isinstance(executor, ThreadExecutor), f"{self.judger_name!r} runs on no threads"
        return executor.threads

    async def _one(self, payload: JudgerPayload) -> JudgerOutput:
        """One payload's checked output, from an async or URL handler (on the event loop)."""
        return check_output(await self._call_one(payload), self.judger_name)

    async def _call_one(self, payload: JudgerPayload) -> Any:
        handler = self.handler
        if handler.kind == "url":
            from judger.runtime.executors.http import HttpExecutor

            assert isinstance(self._executor, HttpExecutor) and isinstance(handler.target, str)
            body = {
                "response": payload.get("response"),
                "label": payload.get("label"),
                "extra_info": self._extra_info(payload),
            }
            return await self._executor.post(handler.target, body)
        if handler.batched:  # one call of the batch form, under this payload's deadline
            outputs = handler.normalise(await handler.call(*self._columns([payload])))
            return self._checked_batch(outputs, 1)[0]
        assert handler.kind == "async"  # a sync handler's single calls go through _judge_batch
        return handler.normalise(await handler.call(*self._args(payload)))

    async def run_payload(self, payload: JudgerPayload) -> JudgerOutput:
        if self.handler.kind == "sync":
            # a thread lane or a worker process: the deadline starts when the call does, not while
            # it queues behind other calls (or behind a hung one)
            (raw,) = await self._judge_batch([payload])
            if isinstance(raw, BaseException):
                raise raw
            return check_output(raw, self.judger_name)
        async with judge_deadline(self.judger_name, self.timeout):
            output = await self._call_one(payload)
        return check_output(output, self.judger_name)

    async def _judge_batch(self, payloads: list[JudgerPayload]) -> list[Any]:
        if self.execution == "process" and not self._worker_checked:
            await self._check_worker()
        if self.handler.batched:
            return await self._run_batched(payloads)
        handler = self.handler
        executor = self._executor
        if handler.kind != "sync":
            return await executor.run(self._one, payloads, self.timeout)
        if not executor.travels:
            return await executor.run(self._payload_call(), payloads, self.timeout)
        # to another process: the handler by reference, its arguments by name
        assert not isinstance(handler.target, str)  # only URL handlers are strings; these are sync
        calls = [((), handler.bind(*self._args(p))) for p in payloads]
        results = await executor.run(partial(spread, handler.target), calls, self.timeout)
        return [r if isinstance(r, BaseException) else handler.normalise(r) for r in results]

    def _columns(self, payloads: Sequence[JudgerPayload]) -> tuple[list[Any], ...]:
        return tuple(list(col) for col in zip(*(self._args(p) for p in payloads)))

    def _checked_batch(self, outputs: Any, size: int) -> list[Any]:
        if not isinstance(outputs, (list, tuple)):
            raise JudgerOutputError(
                f"judger {self.judger_name!r}: batch handler returned {type(outputs).__name__} for "
                f"{size} samples; it must return a list"
            )
        if len(outputs) != size:
            raise JudgerOutputError(
                f"judger {self.judger_name!r}: batch handler returned {len(outputs)} results for "
                f"{size} samples"
            )
        return list(outputs)

    async def _call_batch(self, payloads: Sequence[JudgerPayload]) -> list[Any]:
        """A batch handler's one call for ``payloads``, under one deadline, where the executor runs it."""
        handler = self.handler
        columns = self._columns(payloads)
        executor, size = self._executor, len(payloads)
        call: Call
        assert not isinstance(handler.target, str)  # a URL handler is never batched
        if executor.travels:  # the handler by reference, its arguments by name
            fn, call = handler.target, ((), handler.bind(*columns))
        else:
            fn, call = handler.call, (columns, {})
        outputs = await executor.call_batch(partial(spread, fn), call, self.timeout, size)
        if executor.travels or handler.kind == "async":  # a sync handler.call() normalises itself
            outputs = handler.normalise(outputs)
        return self._checked_batch(outputs, size)

    async def _run_batched(self, payloads: Sequence[JudgerPayload]) -> list[Any]:
        try:
            return await self._call_batch(payloads)
        except Exception as exc:
            if self.on_error == "raise":
                raise
            return [exc] * len(payloads)

    def _payload_call(self) -> Callable[[JudgerPayload], Any]:
        """``payload -> handler result``, with the common case (a positional handler of judger's own
        convention) bound once per batch rather than through three method calls per sample."""
        handler = self.handler
        target = handler.target
        static = self.extra_info
        if handler.positional and not handler.kwargs and handler.signature != "verl" and callable(target):

            def call(payload: JudgerPayload) -> Any:
                info = payload.get("extra_info")
                return target(
                    payload.get("response"), payload.get("label"), {**static, **info} if info else {**static}
                )

            return call
        return lambda payload: handler.call(*self._args(payload))

    async def _check_worker(self) -> None:
        """Under "auto", before the first call: a worker shown the pickled handler must load it (the
        checks at build cannot see, say, a ``tests`` package that is another one in a fresh
        interpreter); if it cannot, the handler runs on threads from now on, said once."""
        from judger.runtime.executors.process import ProcessExecutor

        if self.placement.requested != "auto":
            self._worker_checked = True
            return
        handler = self.handler
        executor = self._executor
        assert isinstance(executor, ProcessExecutor)  # what "process" picks
        error = await executor.loads(
            handler.target, handler.kwargs, self.extra_info, deadline=max(self.timeout, 60.0)
        )
        self._worker_checked = True
        if error is not None:
            reason = f"a worker process cannot load it ({type(error).__name__}: {error})"
            self.execution, self.thread_reason = "thread", reason
            self.micro_batch_window_s = None
            self._executor = pick_executor(self._needs(), self._setting)
            say_threads(self.judger_name, handler, reason)

    async def aclose(self) -> None:
        await self._executor.aclose()
