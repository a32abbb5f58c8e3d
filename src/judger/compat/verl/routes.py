"""verl's ``default_compute_score`` dispatch as one table: every other verl adapter derives from it.

:data:`ROUTES` lists each of verl's scorers once: the ``data_source`` names (and prefixes) verl sends
to it, the judger scorer module that replaces it, whether that scorer can hang (so it runs on the
process pool) and the preset judger config of the route. :func:`default_compute_score`, the router
judger (:class:`~judger.compat.verl.router.VerlRouterJudger`) and the CLI's default config all read
this table: adding a verl route means adding one :class:`Route` here.

prime_math is not reproduced: it calls ``eval()`` on model output, accepts ``gt*100`` and ``gt/100``
(``500`` is "equal" to ``5``) and its symbolic comparison never runs. Its data is ``\\boxed{}``-style
competition math, so the closest correct judge is the MATH judger's Math-Verify equivalence on the
last boxed answer, used in both modes (``fixed_compat``).
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from judger.judgers.config import JudgerConfig

Compat = Literal["verl"] | None


def _presets() -> Any:
    import judger.presets as presets  # presets import scorers: loaded only when a route is built

    return presets


@dataclass(frozen=True)
class Route:
    """One of verl's scorers and judger's replacement for it."""

    name: str
    data_sources: tuple[str, ...]
    scorer: str
    """Module whose ``compute_score(solution_str, ground_truth, extra_info, **options)`` scores it."""
    config: Callable[[Compat], JudgerConfig]
    """The preset judger config for a ``compat`` mode."""
    heavy_modes: tuple[Compat, ...] = ()
    """Modes whose scorer can hang (symbolic math): run on the process pool under a deadline."""
    prefixes: tuple[str, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)
    """Scorer options fixed by the route (e.g. code's continuous pass rate)."""
    fixed_compat: bool = False
    """The route ignores ``compat`` (judger's scorer in both modes)."""
    boxed_input: bool = False
    """The scorer accepts ``extracted=True`` (only the boxed answer crosses to the worker)."""

    def compute_score(self) -> Callable[..., dict[str, Any]]:
        return importlib.import_module(self.scorer).compute_score

    def compat(self, compat: Compat) -> Compat:
        return None if self.fixed_compat else compat

    def runs_on_pool(self, compat: Compat) -> bool:
        return self.compat(compat) in self.heavy_modes


ROUTES: tuple[Route, ...] = (
    Route(
        "gsm8k",
        ("openai/gsm8k",),
        "judger.scorers.math.gsm8k",
        lambda compat: _presets().GSM8KJudgerConfig(compat=compat),
    ),
    Route(
        "math",
        ("lighteval/MATH", "DigitalLearningGmbH/MATH-lighteval", "HuggingFaceH4/MATH-500"),
        "judger.scorers.math.reward",
        lambda compat: _presets().MathJudgerConfig(compat=compat),
        heavy_modes=(None,),
        boxed_input=True,
    ),
    Route(
        "dapo",
        ("math_dapo", "math", "math_dapo_reasoning"),
        "judger.scorers.math.dapo",
        lambda compat: _presets().DapoMathJudgerConfig(compat=compat),
        heavy_modes=(None,),
        prefixes=("aime",),
    ),
    Route(
        "prime_math",
        (
            "numina_aops_forum",
            "numina_synthetic_math",
            "numina_amc_aime",
            "numina_synthetic_amc",
            "numina_cn_k12",
            "numina_olympiads",
        ),
        "judger.scorers.math.reward",
        lambda compat: _presets().MathJudgerConfig(judger_name="prime_math"),
        heavy_modes=(None,),
        fixed_compat=True,
        boxed_input=True,
    ),
    Route(
        "code",
        ("codecontests", "apps", "codeforces", "taco"),
        "judger.scorers.code",
        lambda compat: _presets().CodeJudgerConfig(compat=compat, continuous=True),
        options={"continuous": True},
    ),
    Route(
        "geo3k",
        ("hiyouga/geometry3k",),
        "judger.scorers.math.geo3k",
        lambda compat: _presets().GEO3KJudgerConfig(compat=compat),
        heavy_modes=(None, "verl"),
    ),
    Route(
        "qa",
        (
            "searchR1_nq",
            "searchR1_triviaqa",
            "searchR1_popqa",
            "searchR1_hotpotqa",
            "searchR1_2wikimultihopqa",
            "searchR1_musique",
            "searchR1_bamboogle",
        ),
        "judger.scorers.qa",
        lambda compat: _presets().QAExactMatchJudgerConfig(judger_name="searchR1_qa", compat=compat),
    ),
)
"""verl 0.9's table, in verl's order."""

ROUTES_BY_NAME: dict[str, Route] = {route.name: route for route in ROUTES}
VERL_DATA_SOURCES: dict[str, str] = {ds: route.name for route in ROUTES for ds in route.data_sources}
"""``data_source -> route name`` (the exact names; prefixes are in :data:`ROUTES`)."""
_PREFIXES: tuple[tuple[str, Route], ...] = tuple((p, route) for route in ROUTES for p in route.prefixes)


def find_route(data_source: Any) -> Route:
    """The route verl would use for ``data_source``; NotImplementedError (listing them) otherwise."""
    if isinstance(data_source, str):
        name = VERL_DATA_SOURCES.get(data_source)
        if name is not None:
            return ROUTES_BY_NAME[name]
        for prefix, route in _PREFIXES:
            if data_source.startswith(prefix):
                return route
    raise NotImplementedError(unknown_source(data_source))


def unknown_source(data_source: Any) -> str:
    """Why ``data_source`` has no route. Its first line, all a report shows of a reason, is whole
    and short (with the closest known names); the names verl knows follow on a line of their own."""
    close = []
    if isinstance(data_source, str):
        close = difflib.get_close_matches(data_source, [*VERL_DATA_SOURCES, *(p for p, _ in _PREFIXES)], n=3)
    guess = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
    known = ", ".join(repr(name) for name in VERL_DATA_SOURCES)
    prefixes = ", ".join(repr(p) for p, _ in _PREFIXES)
    return (
        f"Reward function is not implemented for data_source={data_source!r}{guess}\n"
        f"known data sources: {known}, and any name starting with {prefixes}"
    )


def route_of(data_source: Any) -> str:
    """The name of the route verl would use for ``data_source`` (see :func:`find_route`)."""
    return find_route(data_source).name


def route_config(route: str, compat: Compat) -> JudgerConfig:
    """The preset config judger uses for one of verl's routes."""
    try:
        return ROUTES_BY_NAME[route].config(compat)
    except KeyError:
        raise ValueError(f"unknown verl route {route!r}; routes are {sorted(ROUTES_BY_NAME)}") from None
