"""A judger that routes every sample by ``data_source`` with verl's table (:mod:`.routes`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from judger.compat.verl.routes import ROUTES_BY_NAME, Compat, route_config, route_of
from judger.core.judger import Judger
from judger.judgers.composed import ComposedJudger
from judger.judgers.config import JudgerConfig


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
                config = override if override is not None else route_config(name, self.compat)
                judger = config.build()
            self.branches[name] = judger
        return judger

    def unbuilt_executions(self) -> set[Any]:
        """``execution`` of each route not built yet ("inline", "process"; None for a judger without
        one): whoever starts worker processes before the first sample must count these routes too."""
        out: set[Any] = set()
        for name in ROUTES_BY_NAME:
            if name not in self.branches:
                override = self.overrides.get(name)
                source = override if override is not None else route_config(name, self.compat)
                out.add(getattr(source, "execution", None))
        return out


class VerlDefaultJudgerConfig(JudgerConfig):
    """Config of :class:`VerlRouterJudger`: verl's ``default_compute_score`` as a judger.

    ``overrides`` replaces the preset of a route (keys: ``gsm8k``, ``math``, ``dapo``,
    ``prime_math``, ``code``, ``geo3k``, ``qa``), e.g. ``{"code": CodeJudgerConfig(wall_s=2)}``.
    ``timeout`` is unused by the router itself: each route's judger keeps its own deadline.
    """

    judger_name: str = Field("verl_default", description="the judger's name (in failures, logs and reports)")
    compat: Compat = Field(
        None, description="'verl' reproduces verl's scores; None fixes its false negatives"
    )
    overrides: dict[str, Any] = Field(default_factory=dict, description="route -> JudgerConfig or Judger")

    def build_local(self) -> VerlRouterJudger:
        unknown = set(self.overrides) - set(ROUTES_BY_NAME)
        if unknown:
            routes = sorted(ROUTES_BY_NAME)
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
