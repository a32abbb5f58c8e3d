"""verl compatibility: verl's ``default_compute_score`` dispatch, its custom reward loading, reward
managers verl loads through its own config, and a judger config that routes every sample by
``data_source`` as verl does.

- :mod:`.routes`: verl's dispatch table (:data:`ROUTES`), the one place a route is added.
- :mod:`.compute_score`: :func:`default_compute_score` (drop-in for verl's, usable as verl's
  ``reward.custom_reward_function``: ``path=pkg://judger.compat.verl``,
  ``name=default_compute_score``) and :func:`default_compute_score_batch` for verl's batch manager.
- :mod:`.router`: :func:`default_judger_config`, the same dispatch as a judger.
- :mod:`.loading`: :func:`load_reward_function` loads a verl ``compute_score`` so that it pickles.
- :mod:`.managers`: judger's one verl manager family (``NaiveRewardManager``,
  ``BatchRewardManager``, ``DAPORewardManager``) for verl 0.9's reward loop (``run_single``), its
  legacy ``DataProto`` managers (loaded with ``reward.reward_manager.source=importlib``) and
  torch-free batches; :mod:`.manager_judger` builds the judger behind one.
- :mod:`.reward_managers`: the managers' torch-free core (``RewardBatch``, the reward array,
  batch decoding).

Every name here is imported by absolute path, so loading this file by path (as verl's loader does)
gives the same, picklable, functions.
"""

from __future__ import annotations

from judger.core.lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:  # the lazy names below, for type checkers and IDEs
    from judger.compat.verl.compute_score import (
        DEFAULT_HEAVY_TIMEOUT,
        VerlScore,
        default_compute_score,
        default_compute_score_batch,
    )
    from judger.compat.verl.loading import AsyncRewardFunction, RewardFunction, load_reward_function
    from judger.compat.verl.router import VerlDefaultJudgerConfig, VerlRouterJudger, default_judger_config
    from judger.compat.verl.routes import (
        ROUTES,
        VERL_DATA_SOURCES,
        Compat,
        Route,
        find_route,
        route_config,
        route_of,
    )

# Each name is imported on first use: `judger score`'s routing needs the router, not the MATH
# scorers and the worker-process pool behind default_compute_score.
_LAZY: dict[str, str] = {
    **dict.fromkeys(
        ("DEFAULT_HEAVY_TIMEOUT", "VerlScore", "default_compute_score", "default_compute_score_batch"),
        "judger.compat.verl.compute_score",
    ),
    **dict.fromkeys(
        ("AsyncRewardFunction", "RewardFunction", "load_reward_function"), "judger.compat.verl.loading"
    ),
    **dict.fromkeys(
        ("VerlDefaultJudgerConfig", "VerlRouterJudger", "default_judger_config"),
        "judger.compat.verl.router",
    ),
    **dict.fromkeys(
        ("ROUTES", "VERL_DATA_SOURCES", "Compat", "Route", "find_route", "route_config", "route_of"),
        "judger.compat.verl.routes",
    ),
}

# the package by its absolute name, not __name__: verl may load this file by path, as another module
__getattr__ = lazy_exports("judger.compat.verl", _LAZY)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "DEFAULT_HEAVY_TIMEOUT",
    "ROUTES",
    "VERL_DATA_SOURCES",
    "AsyncRewardFunction",
    "Compat",
    "RewardFunction",
    "Route",
    "VerlDefaultJudgerConfig",
    "VerlRouterJudger",
    "VerlScore",
    "default_compute_score",
    "default_compute_score_batch",
    "default_judger_config",
    "find_route",
    "load_reward_function",
    "route_config",
    "route_of",
]
