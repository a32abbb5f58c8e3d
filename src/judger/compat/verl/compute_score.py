"""verl's ``default_compute_score`` (one sample) and its batch form, backed by judger's scorers.

Both are drop-ins for verl's ``reward.custom_reward_function`` (``path=pkg://judger.compat.verl``,
``name=default_compute_score``, or ``name=default_compute_score_batch`` with verl's batch
manager). Scorers that can hang (Math-Verify, sympy) run on judger's shared process pool under a
deadline; the rest run inline. The functions pickle by import path however verl loaded them (a
file path included), so verl's process-pool manager (prime) can ship them to its workers.
"""

from __future__ import annotations

import functools
import logging
import pkgutil
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal

from judger.compat.verl.batch import FAILURE_KEY, FailureLog, Failures, run_sync, score_rows
from judger.compat.verl.batch import logger as batch_logger
from judger.compat.verl.default_options import DEFAULT_FN_KWARGS, ON_FAILURE, DefaultOptions
from judger.compat.verl.result import RESULT_KEYS, VerlScore
from judger.compat.verl.routes import Compat, Route, find_route, route_config
from judger.core.errors import JudgerError
from judger.core.failure_reward import FailureReward, FailureRewardSetting
from judger.core.judger import BaseJudger
from judger.core.sparse_log import SparseLog
from judger.runtime.procpool.shared import shared_pool
from judger.scorers.math.prompt_facts import prompt_facts
from judger.scorers.math.reward import extract, quick_result, unboxed_source

logger = logging.getLogger(__name__)

DEFAULT_HEAVY_TIMEOUT = 10.0
VERL_CALL_KWARGS = ("reward_router_address", "reward_model_tokenizer", "num_turns")
"""What verl's managers may add to a call of the function: accepted, unused by the rule scorers."""
KNOWN_OPTIONS = (*DEFAULT_FN_KWARGS, "full_output")
_missing_labels = SparseLog()
_scorer_failures = SparseLog(first=3)


def _missing_label(data_source: Any, on_failure: str) -> dict[str, Any]:
    """verl scores a sample without a label 0 (its scorers compare against None): so do we, loudly."""
    message = (
        f"judger: sample of data_source={data_source!r} has no label (reward_model.ground_truth is None)"
    )
    if on_failure == "raise":
        raise ValueError(f"{message}; give every row a reward_model.ground_truth")
    n = _missing_labels.tick()
    if n is not None:
        logger.warning("%s: scored 0.0 as verl does (%d such samples so far)", message, n)
    return {"score": 0.0, "acc": False, "pred": None}


def _warm_shared_pool() -> None:
    """Start the shared pool's workers in the background (once per process): samples decided here
    never wait for them, and the first one that needs the full grader finds them warming or ready."""
    try:
        pool = shared_pool()
        if not pool.started:
            pool.start()
    except Exception:  # a pool that cannot start fails the sample that needs it, with its reason
        logger.debug("judger: the shared pool could not start in the background", exc_info=True)


def _score_on_pool(
    route: Route,
    solution_str: Any,
    ground_truth: Any,
    extra_info: dict[str, Any] | None,
    options: dict[str, Any],
    timeout: float,
    on_failure: str,
) -> dict[str, Any]:
    _warm_shared_pool()
    if route.boxed_input and isinstance(solution_str, str):
        # the answer is found here (a linear scan) so only a few characters cross to the worker
        response = solution_str
        solution_str, boxes = extract(solution_str)
        question = extra_info.get("question") if isinstance(extra_info, dict) else None
        # verl's preprocessing keeps the question in some datasets: what it asks for is graded
        facts = {}
        if isinstance(question, str):
            facts = prompt_facts(question, solution_str, ground_truth, unboxed_source(response))
        # verl's per-sample managers call this once per row: an answer that needs no parser is
        # decided here, without a round trip to the pool (a run of two different boxes is graded
        # as their list, and the prompt's facts are weighed, there)
        if not facts and not (boxes and len(set(boxes)) >= 2):
            quick = quick_result(solution_str, ground_truth)
            if quick is not None:
                return quick
        options = {**options, **facts, "extracted": True, "boxes": boxes}
    try:
        return shared_pool().run_sync(
            route.compute_score(), solution_str, ground_truth, extra_info, timeout=timeout, **options
        )
    except (TimeoutError, JudgerError) as exc:
        if on_failure == "raise":
            raise
        return _failed(route, options.get("compat"), on_failure, f"{type(exc).__name__}: {exc}")


@functools.cache
def _route_floor(name: str, compat: Compat) -> float:
    floor = route_config(name, compat).score_floor()
    return 0.0 if floor is None else floor


def _failed(route: Route, compat: Compat, on_failure: str, why: str) -> dict[str, Any]:
    """A sample the route's scorer failed on: the route's lowest score (``on_failure="lowest"``:
    a failure a response provokes never pays more than a wrong answer) or 0, loudly."""
    score = 0.0 if on_failure == "zero" else _route_floor(route.name, compat)
    n = _scorer_failures.tick()
    if n is not None:
        logger.warning(
            "judger: %s scorer failed, scoring %s: %s (%d scorer failures and overruns so far)",
            route.name,
            score,
            why,
            n,
        )
    return {"score": score, "acc": False, "pred": None}


def _route_options(
    route: Route, compat: Compat, sandbox_fusion_url: Any, memory_limit_mb: Any, timeout: float | None
) -> dict[str, Any]:
    options: dict[str, Any] = {**route.options, "compat": route.compat(compat)}
    if route.name == "code":
        # the code scorer takes its judger's sandbox settings, set where the router's are
        bound = {
            "sandbox_fusion_url": sandbox_fusion_url,
            "memory_limit_mb": memory_limit_mb,
            "timeout": timeout,
        }
        update = DefaultOptions.parse(bound, "default_compute_score").route_update(route)
        options.update((key, value) for key, value in update.items() if key != "backend")
        # the sample's deadline, its tests sharing all but a margin of it, as the code judger's
        options.setdefault("timeout", route_config(route.name, compat).timeout)
    return options


def _shaped(result: dict[str, Any], full_output: bool, as_float: bool) -> Any:
    if as_float:
        return float(result["score"])
    if full_output:
        return VerlScore(result)
    return VerlScore({"score": result["score"], "acc": result.get("acc", False), "pred": result.get("pred")})


def _default_compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    sandbox_fusion_url: str | None = None,
    concurrent_semaphore: Any = None,
    memory_limit_mb: int | None = None,
    *,
    compat: Compat = None,
    timeout: float | None = None,
    on_failure: Literal["lowest", "zero", "raise"] = "lowest",
    full_output: bool = False,
    as_float: bool = False,
    **kwargs: Any,
) -> Any:
    """verl's ``default_compute_score``, backed by judger's scorers.

    ``compat="verl"`` reproduces verl's scores (see :mod:`judger.compat.verl.routes` for prime_math);
    the default fixes verl's false negatives. Math-Verify / sympy scorers run on the shared process
    pool with ``timeout`` seconds per sample (default :data:`DEFAULT_HEAVY_TIMEOUT`); the code route
    gives a sample ``timeout`` seconds too (default the code judger's, 300), its tests sharing all but
    a margin of it (a program that spends that scores its remaining tests as timeouts, as the code
    judger does). A sample that overruns (or crashes its worker) scores
    the route's lowest score with a logged warning (``on_failure="lowest"``: 0 for most routes, as
    verl's math_verify gives a timeout, and DAPO's -1 -- what verl's own check gave before
    Math-Verify's, which runs only when the strings differ, overran -- since 0 would pay an answer
    that stalls the check above a wrong one), 0 (``"zero"``) or raises (``"raise"``); so does a
    sample on which a scorer raises. A sample whose label is None scores 0.0, as verl's scorers do,
    with a warning (or raises with ``on_failure="raise"``).
    A MATH answer that needs no LaTeX parser (the label's text, plain numbers, fractions, units,
    mixed numbers, short and without a power tower) is decided in the calling process with the
    same checks the pool runs; the pool starts in the background on the first call that may need it.

    Returns a :class:`VerlScore` ``{"score", "acc", "pred"}`` (every route the same keys, so verl's
    managers can collect them across data sources); ``as_float=True`` returns the score alone (a
    plain float); ``full_output=True`` returns everything the scorer reports.
    ``sandbox_fusion_url`` runs the code routes on that SandboxFusion server (``POST /run_code``), as
    verl does; without it code runs in judger's local bubblewrap sandbox. ``memory_limit_mb`` sets
    the local sandbox's memory limit. ``concurrent_semaphore`` and the arguments verl's managers
    add to a call (``reward_router_address``, ``reward_model_tokenizer``, ``num_turns``) are
    accepted and unused (the code judger bounds its own parallelism; these scorers use no reward
    model). Any other keyword is refused by name: verl's own function ignores it, so a misspelt
    option, or a manager's (``failure_score``) given here, would silently do nothing.
    """
    unknown = sorted(set(kwargs) - set(VERL_CALL_KWARGS))
    if unknown:
        raise TypeError(
            f"default_compute_score: unknown option(s) {unknown}; it takes {sorted(KNOWN_OPTIONS)} "
            f"(and verl's call arguments {list(VERL_CALL_KWARGS)}, unused)"
        )
    if compat not in (None, "verl"):
        raise ValueError(f"compat must be 'verl' or None, got {compat!r}")
    if on_failure not in ON_FAILURE:
        raise ValueError(f"on_failure must be one of {list(ON_FAILURE)}, got {on_failure!r}")
    route = find_route(data_source)
    if ground_truth is None:
        return _shaped(_missing_label(data_source, on_failure), full_output, as_float)
    options = _route_options(route, compat, sandbox_fusion_url, memory_limit_mb, timeout)
    try:
        if route.runs_on_pool(compat):
            heavy_timeout = DEFAULT_HEAVY_TIMEOUT if timeout is None else timeout
            result = _score_on_pool(
                route, solution_str, ground_truth, extra_info, options, heavy_timeout, on_failure
            )
        else:
            result = route.compute_score()(solution_str, ground_truth, extra_info, **options)
    except Exception as exc:
        # in verl an exception here ends the training step: a sample the scorer cannot handle
        # scores 0, loudly, unless the caller asked to see it
        if on_failure == "raise":
            raise
        result = _failed(route, options.get("compat"), on_failure, f"{type(exc).__name__}: {exc}")
    return _shaped(result, full_output, as_float)


def _default_compute_score_batch(
    data_sources: Sequence[Any],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[dict[str, Any] | None] | None = None,
    **kwargs: Any,
) -> list[Any]:
    """The batch form of :func:`default_compute_score`, for verl's ``BatchRewardManager``
    (``compute_score(data_sources=, solution_strs=, ground_truths=, extra_infos=, **reward_kwargs)``).

    The batch is judged with the router judger (:func:`~judger.compat.verl.router.default_judger_config`),
    so identical answers are graded once and heavy routes share the process pool; keyword arguments
    are :func:`default_compute_score`'s (``compat``, ``timeout``, ``on_failure``, ``as_float``,
    ``full_output``, ``sandbox_fusion_url``, ``memory_limit_mb``, ``concurrent_semaphore``), any
    other is refused by name. A sample that fails to be judged scores 0.0 with a warning, or raises
    with ``on_failure="raise"``. One result per sample, in order.
    """

    return _score_batch(data_sources, solution_strs, ground_truths, extra_infos, **kwargs)


_router_judgers: dict[DefaultOptions, BaseJudger] = {}
_batch_failures = FailureLog("default_compute_score_batch", batch_logger)


def _router(options: DefaultOptions) -> BaseJudger:
    judger = _router_judgers.get(options)
    if judger is None:
        judger = _router_judgers[options] = options.judger_config().build()
    return judger


def _score_batch(
    data_sources: Sequence[Any],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Any] | None = None,
    *,
    full_output: bool = False,
    failure_score: FailureRewardSetting | None = None,
    **kwargs: Any,
) -> list[Any]:
    options = DefaultOptions.parse(kwargs, "default_compute_score_batch")
    n = len(data_sources)
    if not len(solution_strs) == len(ground_truths) == n or (
        extra_infos is not None and len(extra_infos) != n
    ):
        raise ValueError(
            f"verl batch: {n} data_sources, {len(solution_strs)} responses, "
            f"{len(ground_truths)} ground_truths"
            + ("" if extra_infos is None else f", {len(extra_infos)} extra_infos")
        )
    judger = _router(replace(options, on_failure="lowest", as_float=False))
    setting = options.failure_reward() if failure_score is None else failure_score
    failures = Failures(
        FailureReward(setting, judger, "failure_score", batch_logger), _batch_failures, options.on_failure
    )
    infos = extra_infos if extra_infos is not None else [None] * n
    states = run_sync(score_rows(judger, list(zip(data_sources, solution_strs, ground_truths, infos))))
    keys = None if full_output else (*RESULT_KEYS, FAILURE_KEY)
    out: list[Any] = []
    for state in states:
        _, reward, failed = failures.outcome(state)
        result = reward if failed else {**reward, FAILURE_KEY: None}
        if keys is not None:
            result = {key: result.get(key) for key in keys}
        out.append(float(result["score"]) if options.as_float else VerlScore(result))
    return out


class ImportableFunction:
    """A module-level function that pickles as *where to import it from*.

    verl loads ``custom_reward_function.path`` by file path into a module that is not in
    ``sys.modules``, so a plain function from it cannot be pickled (verl's prime manager then scores
    every sample 0). This wrapper pickles as its import path whichever copy of the module made it.
    """

    def __init__(self, fn: Any, target: str) -> None:
        self.fn = fn
        self.target = target
        self.__name__ = fn.__name__.lstrip("_")
        self.__qualname__ = self.__name__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn  # inspect.signature follows it

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (pkgutil.resolve_name, (self.target,))

    def __repr__(self) -> str:
        return f"<judger function {self.target}>"


default_compute_score = ImportableFunction(
    _default_compute_score, "judger.compat.verl.compute_score:default_compute_score"
)
default_compute_score_batch = ImportableFunction(
    _default_compute_score_batch, "judger.compat.verl.compute_score:default_compute_score_batch"
)
