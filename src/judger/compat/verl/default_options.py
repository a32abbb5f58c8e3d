"""The keyword arguments verl (or a user) binds on ``default_compute_score``, honoured by judger's
managers, which replace that function with the router judger.

verl binds ``sandbox_fusion_url``, ``concurrent_semaphore`` and ``memory_limit_mb`` with
``functools.partial`` when ``reward.sandbox_fusion.url`` is set; a user binds
``default_compute_score``'s own options through ``custom_reward_function.reward_kwargs``. Each key
is used here or refused by name: none is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from judger.compat.verl.router import VerlDefaultJudgerConfig, default_judger_config
from judger.compat.verl.routes import ROUTES, Compat, Route, route_config
from judger.core.failure_reward import LOWEST, FailureRewardSetting

DEFAULT_FN_KWARGS: dict[str, str] = {
    "compat": "uses: 'verl' reproduces verl's scores",
    "sandbox_fusion_url": "uses: the code route runs on that SandboxFusion server (either URL form)",
    "memory_limit_mb": "uses: the code route's memory limit per program",
    "concurrent_semaphore": "uses: judger's code judger bounds its own parallelism (max_parallel)",
    "timeout": "uses: every route's per-sample deadline",
    "on_failure": "uses: a sample that could not be scored gets the route's lowest score ('lowest', "
    "the default), 0.0 ('zero'), or raises ('raise')",
    "as_float": "uses: the result is the score alone; reward_extra_info is {'acc': score}, as verl "
    "records a float",
}
"""What judger does with each keyword ``default_compute_score`` takes."""

ON_FAILURE = ("lowest", "zero", "raise")

REFUSED_FN_KWARGS: dict[str, str] = {
    "full_output": "the manager's reward_extra_keys chooses the reward_extra_info keys",
}


@dataclass(frozen=True)
class DefaultOptions:
    """``default_compute_score``'s keyword arguments, checked."""

    compat: Compat = None
    sandbox_fusion_url: str | None = None
    memory_limit_mb: int | None = None
    timeout: float | None = None
    on_failure: str = "lowest"
    as_float: bool = False

    @classmethod
    def parse(cls, kwargs: Mapping[str, Any], who: str) -> DefaultOptions:
        refused = sorted(set(kwargs) & set(REFUSED_FN_KWARGS))
        if refused:
            reasons = "; ".join(f"{key}: {REFUSED_FN_KWARGS[key]}" for key in refused)
            raise TypeError(f"{who}: default_compute_score option(s) {refused} are refused here ({reasons})")
        unknown = sorted(set(kwargs) - set(DEFAULT_FN_KWARGS))
        if unknown:
            raise TypeError(
                f"{who}: unknown default_compute_score option(s) {unknown}; "
                f"it takes {sorted(DEFAULT_FN_KWARGS)}"
            )
        on_failure = kwargs.get("on_failure", "lowest")
        if on_failure not in ON_FAILURE:
            raise ValueError(f"{who}: on_failure must be one of {list(ON_FAILURE)}, got {on_failure!r}")
        compat = kwargs.get("compat")
        if compat not in (None, "verl"):
            raise ValueError(f"{who}: compat must be 'verl' or null, got {compat!r}")
        timeout = kwargs.get("timeout")
        memory = kwargs.get("memory_limit_mb")
        return cls(
            compat=compat,
            sandbox_fusion_url=kwargs.get("sandbox_fusion_url") or None,
            memory_limit_mb=int(memory) if memory else None,
            timeout=float(timeout) if timeout is not None else None,
            on_failure=on_failure,
            as_float=bool(kwargs.get("as_float", False)),
        )

    def failure_reward(self) -> FailureRewardSetting:
        """The number of a sample that could not be scored, as ``on_failure`` says: 0.0 for "zero",
        else the judger's lowest score for it ("raise" raises before a number is needed)."""
        return 0.0 if self.on_failure == "zero" else LOWEST

    def route_update(self, route: Route) -> dict[str, Any]:
        """The fields of ``route``'s preset config these options set: the one place
        ``timeout``, ``sandbox_fusion_url`` and ``memory_limit_mb`` are applied, for the router
        judger and for :func:`~judger.compat.verl.compute_score.default_compute_score`'s scorer."""
        update: dict[str, Any] = {}
        if self.timeout is not None:
            update["timeout"] = self.timeout
        if route.name == "code":
            if self.sandbox_fusion_url:
                update["backend"] = "sandbox_fusion"
                update["sandbox_fusion_url"] = self.sandbox_fusion_url
            if self.memory_limit_mb:
                update["memory_mb"] = self.memory_limit_mb
        return update

    def judger_config(self) -> VerlDefaultJudgerConfig:
        """The router judger with these options applied to its routes."""
        overrides: dict[str, Any] = {}
        for route in ROUTES:
            update = self.route_update(route)
            if update:
                base = route_config(route.name, self.compat)
                overrides[route.name] = type(base).model_validate({**base.model_dump(), **update})
        return default_judger_config(compat=self.compat, overrides=overrides)
