"""NativeJudger: judge with a plain reward function, an async function, or an HTTP endpoint."""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from judger.core.deadlines import judge_deadline
from judger.core.errors import JudgerOutputError, JudgeTimeoutError
from judger.core.judger import (
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_TIMEOUT,
    BatchJudger,
    JudgerOutput,
    JudgerPayload,
    OnError,
    gather_bounded,
)
from judger.core.outputs import check_output
from judger.core.rollout import RolloutState
from judger.judgers.execution import Execution, resolve_execution, say_threads
from judger.judgers.handlers import RewardHandler, resolve_handler
from judger.runtime.threads import DEFAULT_MAX_HUNG, HandlerThreads, Job, ThreadBudgetError

if TYPE_CHECKING:
    from judger.runtime.http import HttpClient
    from judger.runtime.procpool.pool import ProcessPool


# A result slot no lane has filled yet (None is a handler's possible, if invalid, result).
_PENDING: Any = object()
# A batch runs on one lane for this long before the others start (see NativeJudger._watch_lanes).
_RAMP_S = 0.002


class _Lane:
    """One worker thread's share of a batch: it takes the batch's next index until none is left.

    Lanes pull from one shared index iterator, so a batch costs one thread hand-off per lane, not
    one per chunk (a hand-off costs more than scoring a few hundred trivial samples). Only the
    driver writes ``failed``, only the thread ``current``: an abandoned lane writes no result for
    the item it was failed for and takes no other, and the driver waits for any slot still
    pending, so an item taken just as its lane was abandoned is never lost.
    """

    __slots__ = ("current", "failed", "future", "job", "started")
    future: asyncio.Future[None]  # the thread's run, set when it is submitted
    job: Job | None  # None when no thread could take it (the future holds why)

    def __init__(self) -> None:
        # (index, since) of the item being scored; None before the thread starts and after it ends.
        # Time spent queued (behind other work, or a hung call) never counts against a deadline.
        self.current: tuple[int, float] | None = None
        self.failed: int | None = None  # the index failed for overrunning: the lane is abandoned
        self.started: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def mark_started(self) -> None:
        """Called on the worker thread when it starts: wakes the driver to watch the deadline."""
        loop = self.started.get_loop()
        try:
            loop.call_soon_threadsafe(_set_once, self.started)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass

    def abandoned_on_failed(self) -> bool:
        """Failed for overrunning and still on that item (or ended): nothing more to wait for."""
        current = self.current
        return self.failed is not None and (current is None or current[0] == self.failed)


def _set_once(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _score_lane(
    lane: _Lane,
    indices: Iterator[int],
    score: Callable[[JudgerPayload], Any],
    payloads: Sequence[JudgerPayload],
    results: list[Any],
) -> None:
    """A lane's thread: score the batch's next item until none is left or the lane is abandoned."""
    if lane.failed is not None:  # its batch was cancelled while the lane queued for a thread
        return
    first = True
    for index in indices:
        lane.current = (index, time.monotonic())
        if first:
            lane.mark_started()  # after ``current`` is set: the driver then sees the deadline
            first = False
        try:
            result = score(payloads[index])
        except Exception as exc:
            result = exc
        failed = lane.failed
        if failed is not None:  # abandoned while on this item (or just before it)
            if failed != index:
                results[index] = result
            break
        results[index] = result
    lane.current = None


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
        self._threads: HandlerThreads | None = None
        self._http: HttpClient | None = None
        if self.handler.kind == "url":
            # here, not at module level: httpx (and the rich console it imports) would be most of
            # `import judger`, which no function or import-string handler needs
            from judger.runtime.http import HttpClient

            self._http = HttpClient(timeout=request_timeout, max_retries=max_retries)

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

    def _thread_pool(self) -> HandlerThreads:
        if self._threads is None:
            self._threads = HandlerThreads(
                self.num_threads, self.max_hung_threads, name=f"judger-{self.judger_name}"
            )
        return self._threads

    async def _in_thread(self, call: Callable[[], Any]) -> Any:
        """``call()`` on a handler thread; a caller that stops waiting (its deadline) abandons it."""
        job = self._thread_pool().submit(call)
        try:
            return await asyncio.wrap_future(job.future)
        except asyncio.CancelledError:
            self._thread_pool().abandon(job)
            raise

    async def _call_one(self, payload: JudgerPayload) -> Any:
        handler = self.handler
        if handler.kind == "url":
            assert self._http is not None and isinstance(handler.target, str)
            body = {
                "response": payload.get("response"),
                "label": payload.get("label"),
                "extra_info": self._extra_info(payload),
            }
            reply = await self._http.post_json(handler.target, body)
            if not isinstance(reply, dict):
                raise JudgerOutputError(
                    f"judger {self.judger_name!r}: {handler.target} replied {type(reply).__name__} "
                    f"{reply!r:.200}; the reply must be a JSON object"
                )
            return reply
        if handler.batched:
            outputs = await self._call_batch([payload])
            return outputs[0]
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
        if self.execution == "process":
            return await self._run_in_processes(payloads)
        if self.handler.kind == "sync":
            return await self._run_threaded(payloads)
        return await gather_bounded([partial(self._run_one_raw, p) for p in payloads], self.max_concurrency)

    async def _call_batch(self, payloads: Sequence[JudgerPayload]) -> list[Any]:
        handler = self.handler
        args = [self._args(p) for p in payloads]
        columns = [list(col) for col in zip(*args)]
        if handler.kind == "async":
            outputs = handler.normalise(await handler.call(*columns))
        elif self.execution == "process":
            outputs = await self._batch_in_process(columns, len(payloads))
        else:
            outputs = await self._in_thread(lambda: handler.call(*columns))
        if not isinstance(outputs, (list, tuple)):
            raise JudgerOutputError(
                f"judger {self.judger_name!r}: batch handler returned {type(outputs).__name__} for "
                f"{len(payloads)} samples; it must return a list"
            )
        if len(outputs) != len(payloads):
            raise JudgerOutputError(
                f"judger {self.judger_name!r}: batch handler returned {len(outputs)} results for "
                f"{len(payloads)} samples"
            )
        return list(outputs)

    async def _run_batched(self, payloads: Sequence[JudgerPayload]) -> list[Any]:
        try:
            if self.execution == "process":  # the pool's deadline runs from when a worker takes it
                return await self._call_batch(payloads)
            async with judge_deadline(self.judger_name, self.timeout, f"batch of {len(payloads)}"):
                return await self._call_batch(payloads)
        except Exception as exc:
            if self.on_error == "raise":
                raise
            return [exc] * len(payloads)

    async def _run_threaded(self, payloads: Sequence[JudgerPayload]) -> list[Any]:
        """Score sync handlers on worker threads, with a deadline per sample.

        Up to ``num_threads`` lanes (one per thread) take the batch's items in turn; the first
        starts at once, the others 2 ms later if the batch is still running. The async side
        sleeps until the item a lane is on would overrun its deadline; if that item is still
        running then, it is failed with a timeout, the lane is abandoned (its thread counted hung
        by :class:`~judger.runtime.threads.HandlerThreads`), and a fresh lane takes over the rest.
        A Python thread cannot be killed, so the stuck call is abandoned, not stopped; once every
        thread of the budget is hung, the remaining items fail with ThreadBudgetError. Only handlers
        declared safe on threads, or that no worker process can load, come here.
        """
        n = len(payloads)
        results: list[Any] = [_PENDING] * n
        indices = iter(range(n))  # shared by the lanes: next() on it is atomic under the GIL
        score = self._payload_call()

        def start() -> _Lane:
            lane = _Lane()
            try:
                lane.job = self._thread_pool().submit(_score_lane, lane, indices, score, payloads, results)
            except ThreadBudgetError as exc:
                lane.job = None
                lane.future = asyncio.get_running_loop().create_future()
                lane.future.set_exception(exc)
            else:
                lane.future = asyncio.wrap_future(lane.job.future)
            return lane

        lanes = [start()]
        try:
            await self._watch_lanes(lanes, start, results, indices, min(self.num_threads, n))
        except BaseException:
            for lane in lanes:  # cancelled (an outer deadline): the lanes take no more items
                lane.failed = -1
                if lane.job is not None:  # one still in a call holds its thread until it returns
                    self._thread_pool().abandon(lane.job, overran=False)
            raise
        return results

    async def _watch_lanes(
        self,
        lanes: list[_Lane],
        start: Callable[[], _Lane],
        results: list[Any],
        indices: Iterator[int],
        wanted: int,
    ) -> None:
        # one lane first; the others only if the batch is still running after _RAMP_S: a batch of
        # cheap calls is then done on one thread, without a hand-off to each of the others
        ramp_at = time.monotonic() + _RAMP_S if wanted > 1 else math.inf
        while True:
            now = time.monotonic()
            if now >= ramp_at:
                ramp_at = math.inf
                running = sum(1 for lane in lanes if not lane.future.done() and lane.failed is None)
                lanes.extend(start() for _ in range(wanted - running))
            wait_on, wake_at = self._inspect_lanes(lanes, start, results, indices, now, ramp_at)
            if not wait_on:
                if not any(r is _PENDING for r in results):  # by identity: results may be anything
                    return
                # a lane took an item just as it was abandoned: it is about to show it in `current`
                wake_at = min(wake_at, now + 0.001)
            if wake_at > now:
                timeout = None if wake_at == math.inf else wake_at - now
                if wait_on:
                    await asyncio.wait(wait_on, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                else:
                    await asyncio.sleep(wake_at - now)

    def _inspect_lanes(
        self,
        lanes: list[_Lane],
        start: Callable[[], _Lane],
        results: list[Any],
        indices: Iterator[int],
        now: float,
        wake_at: float,
    ) -> tuple[list[asyncio.Future[None]], float]:
        """What to wait on, and until when; an overdue item fails here and its lane is replaced."""
        wait_on: list[asyncio.Future[None]] = []
        for k, lane in enumerate(lanes):
            if lane.abandoned_on_failed():
                continue
            if lane.future.done():
                if not lane.future.cancelled():
                    error = lane.future.exception()
                    if isinstance(error, ThreadBudgetError):
                        for index in indices:  # no thread is left to take them: they fail now
                            results[index] = error
                    elif error is not None:
                        raise error  # a bug in the lane itself (handler errors are results)
                    continue
                lane = lanes[k] = start()  # cancelled while it queued: resubmit it
            current = lane.current
            if current is None:
                if not lane.started.done():
                    wait_on.append(lane.started)  # queued: no deadline until a thread takes it
            elif current[1] + self.timeout <= now:
                # overdue: fail that item, abandon the lane, and let a fresh one take the rest
                lane.failed = current[0]
                results[current[0]] = JudgeTimeoutError(self.judger_name, self.timeout)
                if lane.job is not None:
                    self._thread_pool().abandon(lane.job)  # the call still holds its thread
                lanes.append(start())
                wake_at = now  # look at the lanes again, the new one included
                continue
            else:
                wake_at = min(wake_at, current[1] + self.timeout)
            wait_on.append(lane.future)
        return wait_on, wake_at

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
        import pickle

        from judger.runtime.procpool.worker import loads

        if self.placement.requested != "auto":
            self._worker_checked = True
            return
        handler = self.handler
        blob = pickle.dumps(
            (handler.target, handler.kwargs, self.extra_info), protocol=pickle.HIGHEST_PROTOCOL
        )
        (loaded,) = await self._pool().map(loads, [((blob,), {})], timeout=max(self.timeout, 60.0))
        self._worker_checked = True
        if loaded is not True:
            reason = f"a worker process cannot load it ({type(loaded).__name__}: {loaded})"
            self.execution, self.thread_reason = "thread", reason
            self.micro_batch_window_s = None
            say_threads(self.judger_name, handler, reason)

    def _pool(self) -> ProcessPool:
        """The shared worker-process pool, its workers importing the handler's modules before they
        take calls: a call's deadline never pays for importing them."""
        # imported here: the pool's multiprocessing machinery costs a thread-run judger's start-up
        from judger.runtime.procpool.shared import shared_pool

        pool = shared_pool()
        pool.preload_in_workers(self.placement.modules)
        return pool

    async def _run_in_processes(self, payloads: Sequence[JudgerPayload]) -> list[Any]:
        """Sync handler calls on the shared worker-process pool: a call that overruns the deadline
        has its worker killed, so even a handler stuck in C code cannot outlive it."""
        handler = self.handler
        assert not isinstance(handler.target, str)  # only URL handlers are strings; these are sync
        calls = [((), handler.bind(*self._args(p))) for p in payloads]
        results = await self._pool().map(handler.target, calls, timeout=self.timeout)
        return [r if isinstance(r, BaseException) else handler.normalise(r) for r in results]

    async def _batch_in_process(self, columns: list[list[Any]], size: int) -> Any:
        """One call of a batch handler in a worker process, killed if it overruns the deadline."""
        handler = self.handler
        assert not isinstance(handler.target, str)
        pool = self._pool()
        # a batch may pickle to what its samples would, each under the cap of one call
        cap = pool.max_input_bytes * max(1, size)
        (result,) = await pool.map(
            handler.target, [((), handler.bind(*columns))], timeout=self.timeout, max_input_bytes=cap
        )
        if isinstance(result, BaseException):
            raise result
        return handler.normalise(result)

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
        threads, self._threads = self._threads, None
        if threads is not None:
            threads.shutdown()  # never waits: a hung call's daemon thread is left to itself
