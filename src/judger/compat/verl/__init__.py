"""verl compatibility: verl's ``default_compute_score`` dispatch, its custom reward loading, and a
judger config that routes every sample by ``data_source`` as verl does.

- :func:`default_compute_score` is a drop-in for ``verl.utils.reward_score.default_compute_score``
  (usable as verl's ``custom_reward_function``: path of this file's module, name
  ``default_compute_score``). Scorers that can hang (Math-Verify, sympy) run on judger's shared
  process pool under a deadline; the rest run inline.
- :func:`load_reward_function` loads a verl-style ``compute_score`` from a file or module so that it
  pickles (to worker processes, Ray actors) and merges ``reward_kwargs`` into every call.
- :func:`default_judger_config` is a :class:`~judger.JudgerConfig` whose judger routes each sample
  to the preset judgers with verl's table, batching per route and failing samples one by one.

Routes (verl's scorer -> judger's):

- ``openai/gsm8k``: gsm8k -> ``GSM8KJudgerConfig``
- ``lighteval/MATH``, ``DigitalLearningGmbH/MATH-lighteval``, ``HuggingFaceH4/MATH-500``: math_reward
  -> ``MathJudgerConfig``
- ``math_dapo``, ``math``, ``math_dapo_reasoning``, any name starting with ``aime``: math_dapo
  -> ``DapoMathJudgerConfig``
- ``numina_*`` (six names): prime_math -> ``MathJudgerConfig`` in its default mode, in both modes
- ``codecontests``, ``apps``, ``codeforces``, ``taco``: prime_code / sandbox_fusion
  -> ``CodeJudgerConfig`` (continuous)
- ``hiyouga/geometry3k``: geo3k -> ``GEO3KJudgerConfig``
- ``searchR1_*`` (seven names): search_r1_like_qa_em -> ``QAExactMatchJudgerConfig``

prime_math is not reproduced: it calls ``eval()`` on model output, accepts ``gt*100`` and ``gt/100``
(``500`` is "equal" to ``5``) and its symbolic comparison never runs. Its data is ``\\boxed{}``-style
competition math, so the closest correct judge is the MATH judger's Math-Verify equivalence on
the last boxed answer, used in both modes.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import logging
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, Literal

from pydantic import Field

from judger.core.errors import JudgerError
from judger.core.judger import (
    Judger,
)
from judger.judgers.composed import ComposedJudger
from judger.judgers.config import JudgerConfig
from judger.judgers.handlers import BATCH_ATTR

logger = logging.getLogger(__name__)

Compat = Literal["verl"] | None
Route = Literal["gsm8k", "math", "dapo", "prime_math", "code", "geo3k", "qa"]

VERL_DATA_SOURCES: dict[str, Route] = {
    "openai/gsm8k": "gsm8k",
    "lighteval/MATH": "math",
    "DigitalLearningGmbH/MATH-lighteval": "math",
    "HuggingFaceH4/MATH-500": "math",
    "math_dapo": "dapo",
    "math": "dapo",
    "math_dapo_reasoning": "dapo",
    "numina_aops_forum": "prime_math",
    "numina_synthetic_math": "prime_math",
    "numina_amc_aime": "prime_math",
    "numina_synthetic_amc": "prime_math",
    "numina_cn_k12": "prime_math",
    "numina_olympiads": "prime_math",
    "codecontests": "code",
    "apps": "code",
    "codeforces": "code",
    "taco": "code",
    "hiyouga/geometry3k": "geo3k",
    "searchR1_nq": "qa",
    "searchR1_triviaqa": "qa",
    "searchR1_popqa": "qa",
    "searchR1_hotpotqa": "qa",
    "searchR1_2wikimultihopqa": "qa",
    "searchR1_musique": "qa",
    "searchR1_bamboogle": "qa",
}
"""verl's dispatch table; names starting with ``aime`` also go to ``dapo``."""

DEFAULT_HEAVY_TIMEOUT = 10.0

_warned = {"sandbox_fusion_url": False}


def route_of(data_source: Any) -> Route:
    """The scorer verl would use for ``data_source``; NotImplementedError (listing them) otherwise."""
    if isinstance(data_source, str):
        route = VERL_DATA_SOURCES.get(data_source)
        if route is not None:
            return route
        if data_source.startswith("aime"):
            return "dapo"
    known = ", ".join(repr(name) for name in VERL_DATA_SOURCES)
    raise NotImplementedError(
        f"Reward function is not implemented for data_source={data_source!r}; "
        f"known data sources: {known}, and any name starting with 'aime'"
    )


# --- default_compute_score ---------------------------------------------------------------------


def _scorer(route: Route) -> Callable[..., dict[str, Any]]:
    module = {
        "gsm8k": "judger.scorers.math.gsm8k",
        "math": "judger.scorers.math.reward",
        "prime_math": "judger.scorers.math.reward",
        "dapo": "judger.scorers.math.dapo",
        "code": "judger.scorers.code",
        "geo3k": "judger.scorers.math.geo3k",
        "qa": "judger.scorers.qa",
    }[route]
    return importlib.import_module(module).compute_score


def _runs_on_pool(route: Route, compat: Compat) -> bool:
    """Routes whose scorer can hang (symbolic math); verl-mode math and dapo are plain regexes."""
    if route in ("geo3k", "prime_math"):
        return True
    return route in ("math", "dapo") and compat is None


def default_compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    sandbox_fusion_url: str | None = None,
    concurrent_semaphore: Any = None,
    memory_limit_mb: int | None = None,
    *,
    compat: Compat = None,
    timeout: float = DEFAULT_HEAVY_TIMEOUT,
    on_failure: Literal["zero", "raise"] = "zero",
    full_output: bool = False,
    **kwargs: Any,
) -> dict[str, Any]:
    """verl's ``default_compute_score``, backed by judger's scorers.

    ``compat="verl"`` reproduces verl's scores (see the module docstring for prime_math and code);
    the default fixes verl's false negatives. Math-Verify / sympy scorers run on the shared process
    pool with ``timeout`` seconds per sample: a sample that overruns (or crashes its worker) scores
    0 with a logged warning (``on_failure="zero"``, as verl's math_verify does on a timeout) or
    raises (``"raise"``). Returns ``{"score", "acc", "pred"}`` (every route the same keys, so
    verl's reward managers can collect them across data sources); ``full_output=True`` returns
    everything the scorer reports. ``sandbox_fusion_url`` is not supported (code runs in judger's
    local sandbox); ``memory_limit_mb`` sets the code sandbox's memory limit. Other keyword
    arguments are ignored, as verl ignores them.
    """
    if sandbox_fusion_url and not _warned["sandbox_fusion_url"]:
        _warned["sandbox_fusion_url"] = True
        logger.warning("judger: sandbox_fusion_url is ignored; code runs in judger's local sandbox")
    if compat not in (None, "verl"):
        raise ValueError(f"compat must be 'verl' or None, got {compat!r}")
    route = route_of(data_source)
    scorer = _scorer(route)
    options: dict[str, Any] = {"compat": None if route == "prime_math" else compat}
    if route == "code":
        options["continuous"] = True
        if memory_limit_mb:
            options["memory_mb"] = int(memory_limit_mb)
    if _runs_on_pool(route, options["compat"]):
        result = _score_on_pool(
            route, scorer, solution_str, ground_truth, extra_info, options, timeout, on_failure
        )
    else:
        result = scorer(solution_str, ground_truth, extra_info, **options)
    if full_output:
        return result
    return {"score": result["score"], "acc": result.get("acc", False), "pred": result.get("pred")}


def _score_on_pool(
    route: Route,
    scorer: Callable[..., dict[str, Any]],
    solution_str: Any,
    ground_truth: Any,
    extra_info: dict[str, Any] | None,
    options: dict[str, Any],
    timeout: float,
    on_failure: str,
) -> dict[str, Any]:
    from judger.runtime.procpool.pool import shared_pool

    if route in ("math", "prime_math") and isinstance(solution_str, str):
        # the boxed answer is found here (a linear scan) so only a few characters cross to the worker
        from judger.scorers.math.boxed import last_boxed

        solution_str = last_boxed(solution_str)
        options = {**options, "extracted": True}
    try:
        pool = shared_pool()
        return pool.run_sync(scorer, solution_str, ground_truth, extra_info, timeout=timeout, **options)
    except (TimeoutError, JudgerError) as exc:
        if on_failure == "raise":
            raise
        logger.warning("judger: %s scorer failed, scoring 0: %s", route, exc)
        return {"score": 0.0, "acc": False, "pred": None}


# --- loading custom reward functions -----------------------------------------------------------


def _module_name_for(path: str) -> str:
    stem = os.path.splitext(os.path.basename(path))[0]
    safe = "".join(c if c.isalnum() or c == "_" else "_" for c in stem)
    digest = hashlib.sha1(path.encode()).hexdigest()[:10]
    return f"judger_reward_{safe}_{digest}"


def _load_module(source: str | ModuleType) -> ModuleType:
    if isinstance(source, ModuleType):
        return source
    if os.path.isfile(source) or source.endswith(".py"):
        path = os.path.realpath(source)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"reward function file not found: {source!r}")
        name = _module_name_for(path)
        module = sys.modules.get(name)
        if module is not None and os.path.realpath(getattr(module, "__file__", "") or "") == path:
            return module
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load reward function file {source!r}")
        module = importlib.util.module_from_spec(spec)
        # registered before running it, so functions defined in it pickle by reference
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return module
    return importlib.import_module(source)


class RewardFunction:
    """A reward function loaded by :func:`load_reward_function`.

    Calls the function with ``reward_kwargs`` merged over the call's own keyword arguments (config
    values win, as in verl). It has the function's signature (so judger recognises verl-style
    single and batch functions) and pickles as *where to load it from*, so it reaches spawned
    processes and Ray actors even when the file is not importable there by module name.
    """

    def __init__(
        self, source: str, name: str = "compute_score", reward_kwargs: dict[str, Any] | None = None
    ) -> None:
        self.source = source
        self.name = name
        self.reward_kwargs = dict(reward_kwargs or {})
        module = _load_module(source)
        fn = getattr(module, name, None)
        if fn is None:
            raise AttributeError(f"reward function {name!r} not found in {source!r}")
        if not callable(fn):
            raise TypeError(f"{name!r} in {source!r} is not callable")
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", name)
        self.__qualname__ = getattr(fn, "__qualname__", name)
        self.__doc__ = getattr(fn, "__doc__", None)
        try:
            self.__signature__ = inspect.signature(fn)
        except (TypeError, ValueError):
            pass
        if getattr(fn, BATCH_ATTR, False):
            setattr(self, BATCH_ATTR, True)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **{**kwargs, **self.reward_kwargs})

    def __reduce__(self) -> tuple[Any, ...]:
        return (load_reward_function, (self.source, self.name, self.reward_kwargs))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.source!r}, {self.name!r}, reward_kwargs={self.reward_kwargs!r})"


class AsyncRewardFunction(RewardFunction):
    """:class:`RewardFunction` over an ``async def`` function (judger awaits it)."""

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return await self.fn(*args, **{**kwargs, **self.reward_kwargs})


def load_reward_function(
    path_or_module: str | ModuleType,
    name: str = "compute_score",
    reward_kwargs: dict[str, Any] | None = None,
) -> RewardFunction:
    """Load ``name`` from a ``.py`` file, a module name or a module, as verl's
    ``custom_reward_function`` (``path`` + ``name`` + ``reward_kwargs``) does.

    A file is imported as module ``judger_reward_<stem>_<hash of its path>`` and registered in
    ``sys.modules``, so its functions pickle by reference in this process and its forks; the
    returned :class:`RewardFunction` also pickles to fresh (spawned) processes. Use it directly as
    a ``reward_handler``: verl-style single or batch signatures are recognised by parameter names.
    """
    if isinstance(path_or_module, ModuleType):
        source = path_or_module.__name__
    else:
        source = os.fspath(path_or_module)
        if os.path.isfile(source):
            source = os.path.realpath(source)  # a spawned process may start in another directory
    fn = getattr(_load_module(source), name, None)
    cls = AsyncRewardFunction if inspect.iscoroutinefunction(fn) else RewardFunction
    return cls(source, name, reward_kwargs)


# --- a judger that routes like verl ------------------------------------------------------------


def route_config(route: Route, compat: Compat) -> JudgerConfig:
    """The preset config judger uses for one of verl's routes."""
    import judger.presets as presets

    if route == "gsm8k":
        return presets.GSM8KJudgerConfig(compat=compat)
    if route == "math":
        return presets.MathJudgerConfig(compat=compat)
    if route == "prime_math":
        return presets.MathJudgerConfig(judger_name="prime_math")
    if route == "dapo":
        return presets.DapoMathJudgerConfig(compat=compat)
    if route == "code":
        return presets.CodeJudgerConfig(compat=compat, continuous=True)
    if route == "geo3k":
        return presets.GEO3KJudgerConfig(compat=compat)
    return presets.QAExactMatchJudgerConfig(judger_name="searchR1_qa", compat=compat)


class VerlRouterJudger(ComposedJudger):
    """Judge each sample with the preset judger verl's table picks for its ``data_source``.

    A batch is split per route and each route's judger gets one batched call (so its dedup and
    process pool work across the batch). A sample whose ``data_source`` is not in the table fails
    alone with verl's NotImplementedError message. Route judgers are built on first use: a route
    whose judger cannot be built (e.g. GEO3K ``compat="verl"`` without ``mathruler``) fails only its
    own samples.
    """

    def __init__(
        self,
        judger_name: str = "verl_default",
        *,
        compat: Compat = None,
        overrides: dict[str, JudgerConfig | Judger] | None = None,
        on_error: Literal["fail", "raise"] = "fail",
        max_concurrency: int = 64,
        timeout: float = 300.0,
    ) -> None:
        # not ComposedJudger.__init__: the branches are verl's routes, built on first use
        Judger.__init__(
            self, judger_name, on_error=on_error, timeout=timeout, max_concurrency=max_concurrency
        )
        self.compat = compat
        self.overrides = dict(overrides or {})
        self.branches: dict[str, Judger] = {}
        self.merge_fn = None

    def route(self, data_source: Any) -> list[str]:
        return [route_of(data_source)]

    def branch(self, name: str) -> Judger:
        judger = self.branches.get(name)
        if judger is None:
            override = self.overrides.get(name)
            if isinstance(override, Judger):
                judger = override
            else:
                config = override if override is not None else route_config(name, self.compat)  # type: ignore[arg-type]
                judger = config.build()
            self.branches[name] = judger
        return judger


class VerlDefaultJudgerConfig(JudgerConfig):
    """Config of :class:`VerlRouterJudger`: verl's ``default_compute_score`` as a judger.

    ``overrides`` replaces the preset of a route (keys: ``gsm8k``, ``math``, ``dapo``,
    ``prime_math``, ``code``, ``geo3k``, ``qa``), e.g. ``{"code": CodeJudgerConfig(wall_s=2)}``.
    ``timeout`` is unused by the router itself: each route's judger keeps its own deadline.
    """

    judger_name: str = "verl_default"
    compat: Compat = Field(
        None, description="'verl' reproduces verl's scores; None fixes its false negatives"
    )
    overrides: dict[str, Any] = Field(default_factory=dict, description="route -> JudgerConfig or Judger")

    def build_local(self) -> VerlRouterJudger:
        unknown = set(self.overrides) - set(VERL_DATA_SOURCES.values())
        if unknown:
            routes = sorted(set(VERL_DATA_SOURCES.values()))
            raise ValueError(f"overrides has unknown routes {sorted(unknown)}; routes are {routes}")
        return VerlRouterJudger(
            self.judger_name,
            compat=self.compat,
            overrides=self.overrides,
            on_error=self.on_error,
            max_concurrency=self.max_concurrency,
            timeout=self.timeout,
        )


def default_judger_config(compat: Compat = None, **options: Any) -> VerlDefaultJudgerConfig:
    """The judger config equivalent of verl's ``default_compute_score`` (routes each sample by
    ``data_source``); ``options`` are :class:`VerlDefaultJudgerConfig` fields."""
    return VerlDefaultJudgerConfig(compat=compat, **options)
