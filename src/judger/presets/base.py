"""ScorerJudger: a Judger over a pure scoring function, run inline or on killable worker processes.

Scorers are plain top-level functions ``compute_score(solution_str, ground_truth, extra_info=None,
**options) -> dict``; ``execution`` declares what they need, and :mod:`judger.runtime.executors`
picks where they run:

- ``execution="inline"``: in the event loop, for scorers whose cost is bounded by construction
  (a regex over the last few hundred characters). Fastest: no hand-off at all.
- ``execution="process"``: on the shared :class:`~judger.runtime.procpool.pool.ProcessPool`, with
  a deadline per sample after which the worker is killed and replaced. For anything that can hang
  (symbolic math, running code).

Within one batch, identical (answer, label, options) are scored once: GRPO groups repeat answers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from judger.core.errors import JudgeTimeoutError, NoResponseError
from judger.core.judger import (
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_TIMEOUT,
    BatchJudger,
    Judger,
    JudgerPayload,
    OnError,
)
from judger.core.rollout import RolloutState
from judger.judgers.config import JudgerConfig
from judger.presets.scorer_options import check_scorer_options
from judger.presets.xtuner_options import build_with_handler, check_options, fold_extra_info
from judger.runtime.executors.base import Executor, Needs, spread
from judger.runtime.executors.pick import Setting, pick_executor
from judger.runtime.executors.process import process_pool
from judger.scorers.committed import committed_text, opens_reasoning

Execution = Literal["inline", "process"]
ScorerFn = Callable[..., dict[str, Any]]

# grades kept per judger (remembers_grades): a few MB, emptied when full
_MAX_GRADES = 16384


def _key(payload: JudgerPayload, extra_info_fields: Sequence[str] | None = None) -> tuple[Any, ...]:
    """What decides a score: the answer, the label, the options, and of ``extra_info`` only the
    fields the scorer reads (``extra_info_fields``; None: all of it). verl rows carry an index and a
    sample number in ``extra_info`` that no math scorer reads: keyed on, they defeat dedup."""
    try:
        extra = payload.get("extra_info")
        kwargs = payload.get("scorer_kwargs")
        if extra and extra_info_fields is not None:
            extra = {k: extra[k] for k in extra_info_fields if k in extra}
        return (
            payload.get("response"),
            repr(payload.get("label")),
            repr(sorted(extra.items())) if extra else None,
            repr(sorted(kwargs.items())) if kwargs else None,
        )
    except Exception:
        # a key that cannot be built (extra_info not a dict, a label whose repr refuses such as
        # 10**5000): this sample is scored on its own, and fails alone if its scorer refuses it too
        return (object(),)


class ScorerJudger(BatchJudger):
    """Judge with ``scorer(response, label, extra_info, **options, **payload["scorer_kwargs"])``.

    ``extra_info_fields``: the ``extra_info`` keys the scorer reads (``()``: none), so that samples
    differing only in others are scored once; None (the default) keys on all of it.
    """

    def __init__(
        self,
        judger_name: str,
        scorer: ScorerFn,
        options: dict[str, Any] | None = None,
        *,
        execution: Execution = "inline",
        on_error: OnError = "fail",
        timeout: float = DEFAULT_TIMEOUT,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        pool: Any = None,
        response_window: int | None = None,
        extra_info_fields: Sequence[str] | None = None,
    ) -> None:
        super().__init__(judger_name, on_error=on_error, timeout=timeout, max_concurrency=max_concurrency)
        if execution not in ("inline", "process"):
            raise ValueError(f"execution must be 'inline' or 'process', got {execution!r}")
        self.scorer = scorer
        self.options = dict(options or {})
        self.execution: Execution = execution
        self._pool = pool
        # a scorer that reads only the end of a response gets only that: Ray actors and worker
        # processes then receive a few hundred bytes instead of the whole text
        self.response_window = response_window
        self.extra_info_fields = None if extra_info_fields is None else tuple(extra_info_fields)
        if execution == "process":
            self.micro_batch_window_s = 0.0  # concurrent judge() calls share pool hand-offs
        self._grades: dict[Any, dict[str, Any]] = {}
        # scorers are pure functions: bounded ones run on the loop, any other may hang (a worker)
        needs = Needs(on_loop=execution == "inline")
        self._executor: Executor = pick_executor(needs, Setting(judger_name, pool=pool))

    @property
    def pool(self) -> Any:
        """The process pool this judger's scorer runs on under ``execution="process"``: the one it
        was given, else the shared pool as it is now (asked for each time, never kept)."""
        return process_pool(self._pool)

    remembers_grades: ClassVar[bool] = False
    """Whether a grade from the pool is kept (by dedup key) for the same answer in a later batch: for
    a scorer that is a pure function of its key. A timeout or a failure is never kept."""

    def preprocess(self, rollout_state: RolloutState) -> JudgerPayload:
        reward_model = rollout_state.reward_model
        response = rollout_state.response
        if response is None:  # the sample fails (captured per on_error), it is not scored
            raise NoResponseError()
        if self.response_window is not None and len(response) > self.response_window:
            if self.options.get("compat") is None and opens_reasoning(response):
                # the window loses the response's opening <think>: the scorer must still see that
                # what it reads may be reasoning (a </think> after the answer stays in the window)
                response = committed_text(response)
            response = response[-self.response_window :]
        payload: JudgerPayload = {
            "response": response,
            "label": reward_model.get("ground_truth") if reward_model else None,
        }
        extra = rollout_state.extra_fields.get("extra_info")
        if extra:
            payload["extra_info"] = extra
        return payload

    def _call_args(self, payload: JudgerPayload) -> tuple[tuple[Any, ...], dict[str, Any]]:
        kwargs = {**self.options, **(payload.get("scorer_kwargs") or {})}
        return (payload.get("response"), payload.get("label"), payload.get("extra_info")), kwargs

    def _dedup_key(self, payload: JudgerPayload) -> tuple[Any, ...]:
        # identical (answer, label, options) are scored once: GRPO groups repeat answers
        return _key(payload, self.extra_info_fields)

    async def _judge_batch(self, payloads: list[JudgerPayload]) -> list[Any]:
        return await self._score(payloads)

    def quick_result(self, payload: JudgerPayload) -> dict[str, Any] | None:
        """The scorer's result for ``payload`` where it is decided without running the scorer (a
        bounded check in the calling process, no parser), else None: scored on the pool."""
        return None

    def timeout_result(self, payload: JudgerPayload) -> dict[str, Any] | None:
        """What a sample scores when its scorer overran the deadline on the pool: None (the default)
        fails it with JudgeTimeoutError. A judger whose verdict does not need the part that can stall
        gives that verdict instead: an answer that stalls the grader is still graded, not failed."""
        return None

    def _after_timeout(self, payload: JudgerPayload) -> Any:
        """:meth:`timeout_result`, or the timeout failure; a fallback that raises fails this sample
        alone, with its own reason."""
        try:
            result = self.timeout_result(payload)
        except Exception as exc:
            return exc
        return result if result is not None else JudgeTimeoutError(self.judger_name, self.timeout)

    async def _score_on_pool(self, payloads: Sequence[JudgerPayload]) -> list[Any]:
        """Raw results in order: the quick ones here, the rest on the pool under its deadline."""
        out: list[Any] = [self.quick_result(p) for p in payloads]
        pending = [i for i, r in enumerate(out) if r is None]
        if not pending:
            return out
        keys: list[Any] = [None] * len(pending)
        if self.remembers_grades:
            pending, keys = self._recall(payloads, pending, out)
            if not pending:
                return out
        calls = [self._call_args(payloads[i]) for i in pending]
        results = await self._executor.run(partial(spread, self.scorer), calls, self.timeout)
        for i, key, r in zip(pending, keys, results):
            if isinstance(r, TimeoutError):
                r = self._after_timeout(payloads[i])
            elif key is not None and type(r) is dict:
                self._remember(key, r)
            out[i] = r
        return out

    def _recall(
        self, payloads: Sequence[JudgerPayload], pending: list[int], out: list[Any]
    ) -> tuple[list[int], list[Any]]:
        """Fill ``out`` with the grades given before for the same key; the payloads still to grade,
        and their keys (None: not to be remembered)."""
        grades = self._grades
        still: list[int] = []
        keys: list[Any] = []
        for i in pending:
            key: Any = self._dedup_key(payloads[i])
            try:
                known = grades.get(key)
            except TypeError:  # an unhashable label: graded every time
                known, key = None, None
            if known is not None:
                out[i] = dict(known)  # each sample owns its output dict
                continue
            still.append(i)
            keys.append(None if len(key or ()) < 2 else key)  # (object(),): a key that never matches
        return still, keys

    def _remember(self, key: Any, grade: dict[str, Any]) -> None:
        if len(self._grades) >= _MAX_GRADES:
            self._grades.clear()
        self._grades[key] = dict(grade)

    async def _score(self, payloads: Sequence[JudgerPayload]) -> list[Any]:
        """Raw scorer results (dicts or exceptions), one per payload, in order."""
        if self._executor.travels:  # a hand-off worth saving: what is decided here first
            return await self._score_on_pool(payloads)
        scorer, call_args = self.scorer, self._call_args

        def score(payload: JudgerPayload) -> Any:  # in this process: no call list, no spread
            args, kwargs = call_args(payload)
            return scorer(*args, **kwargs)

        return await self._executor.run(score, payloads, self.timeout)


class ScorerJudgerConfig(JudgerConfig):
    """Base of the preset configs: a scorer function plus its options, built into a ScorerJudger.

    Subclasses set ``judger_name``'s default, implement :meth:`scorer` and :meth:`scorer_options`,
    and pick the default ``execution``. XTuner's ``extra_info`` and ``reward_handler`` options are
    honoured or refused as :mod:`judger.presets.xtuner_options` says.
    """

    xtuner_extra_info: ClassVar[tuple[str, ...]] = ()
    """The fields XTuner's handler for this preset reads from ``extra_info`` (empty: no XTuner preset)."""

    compat: Literal["verl"] | None = Field(
        None, description="'verl' reproduces verl's scorer exactly; None (default) uses judger's fixed scorer"
    )
    # presets run inline or on worker processes, never on threads: the field narrows JudgerConfig's
    execution: Execution = Field(
        "inline",
        description=(
            "'inline': scored on the event loop; 'process': in killable worker processes (a sample that "
            "overruns its deadline has its worker killed); presets never score on threads"
        ),
    )  # type: ignore[assignment]
    extra_info_fields: ClassVar[tuple[str, ...] | None] = None
    """The ``extra_info`` keys this preset's scorer reads (``()``: none; None: all): the dedup key."""

    @model_validator(mode="before")
    @classmethod
    def _fold_extra_info(cls, data: Any) -> Any:
        return fold_extra_info(cls.__name__, cls.xtuner_extra_info, data)

    @model_validator(mode="after")
    def _check_xtuner_options(self) -> ScorerJudgerConfig:
        check_options(self, self.xtuner_extra_info, self.compat)
        return self

    def handler_extra_info(self) -> dict[str, Any]:
        """The ``extra_info`` a ``reward_handler`` gets from this preset, as XTuner packs it."""
        return {key: getattr(self, key) for key in self.xtuner_extra_info}

    def scorer(self) -> ScorerFn:
        raise NotImplementedError(f"{type(self).__name__} must implement scorer()")

    def score_floor(self) -> float | None:
        if self.lowest_score is not None:
            return self.lowest_score
        # a reward_handler of the user's decides the scores: its floor is the user's to declare
        return None if self.reward_handler is not None else self.preset_floor()

    def preset_floor(self) -> float | None:
        """The lowest score this preset's scorer gives with these options (None: not known)."""
        return None

    def scorer_options(self) -> dict[str, Any]:
        return {"compat": self.compat}

    def judger_class(self) -> type[ScorerJudger]:
        return ScorerJudger

    def judger_options(self) -> dict[str, Any]:
        """Extra keyword arguments of :meth:`judger_class` (e.g. ``response_window``)."""
        return {}

    def build_local(self) -> Judger:
        if self.reward_handler is not None:
            return build_with_handler(self, self.handler_extra_info())
        scorer, options = self.scorer(), self.scorer_options()
        check_scorer_options(type(self).__name__, scorer, options)
        return self.judger_class()(
            self.judger_name,
            scorer,
            options,
            execution=self.execution,
            on_error=self.on_error,
            timeout=self.timeout,
            max_concurrency=self.max_concurrency,
            extra_info_fields=self.extra_info_fields,
            **self.judger_options(),
        )
