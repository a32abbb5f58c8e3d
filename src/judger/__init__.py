"""judger: score LLM rollouts for RL post-training.

``RolloutState`` in, ``state.reward`` (a dict with a numeric ``score``) out. This module holds the
public API, pinned by ``tests/test_public_api.py``; everything else lives in subpackages:

- ``judger.presets`` built-in judger configs, ``judger.verifiers`` LLM verifiers,
- ``judger.remote`` judgers on Ray, ``judger.runtime`` worker processes, the code sandbox, HTTP,
- ``judger.compat.verl`` verl's reward functions and managers, ``judger.trainer`` the trainer side,
- ``judger.server`` the HTTP reward service, ``judger.cli`` the ``judger`` command.
"""

from __future__ import annotations

from judger.core.errors import JudgerError
from judger.core.lazy import lazy_exports

TYPE_CHECKING = False  # not typing's: importing typing would double the cost of ``import judger``
if TYPE_CHECKING:  # the lazy names below, for type checkers and IDEs
    from typing import Any

    from judger.core.judger import (
        BaseJudger,
        Judger,
        JudgerOutput,
        JudgerOutputBatch,
        JudgerPayload,
        JudgerPayloadBatch,
    )
    from judger.core.rollout import RolloutState, Status
    from judger.judgers.composed import ComposedJudger, weighted_sum
    from judger.judgers.config import ComposedJudgerConfig, CPUResourcesConfig, JudgerConfig, build_judger
    from judger.judgers.handlers import batch_handler
    from judger.judgers.native import NativeJudger

    # the defining modules, not the lazy packages: a checker (and the API reference, which reads
    # this block) sees each class itself rather than a package ``__getattr__``'s Any. For the
    # checkers only: every preset is exported, listed here or not (see ``__getattr__`` below)
    from judger.presets.code import CodeJudgerConfig as CodeJudgerConfig
    from judger.presets.dapo import DapoMathJudgerConfig as DapoMathJudgerConfig
    from judger.presets.geo3k import GEO3KJudgerConfig as GEO3KJudgerConfig
    from judger.presets.gsm8k import GSM8KJudgerConfig as GSM8KJudgerConfig
    from judger.presets.math import MathJudgerConfig as MathJudgerConfig
    from judger.presets.math_verify import MathVerifyJudgerConfig as MathVerifyJudgerConfig
    from judger.presets.qa import QAExactMatchJudgerConfig as QAExactMatchJudgerConfig
    from judger.remote.actor import JudgerActor
    from judger.remote.pool import JudgerPool
    from judger.remote.remote_judger import RemoteJudger
    from judger.remote.resources import CPUResourceManager
    from judger.verifiers.compass import CompassVerifierV2Config

__version__ = "0.1.0"

# Every public name but the two above loads on first use: ``import judger`` (and so every
# ``import judger.<sub>``, which runs this file first) stays free of pydantic, asyncio and the
# optional dependencies; ``judger --version``, the viewer's first page and a worker process that
# needs one scorer pay only for what they touch.
_LAZY: dict[str, str] = {
    "BaseJudger": "judger.core.judger",
    "Judger": "judger.core.judger",
    "JudgerOutput": "judger.core.judger",
    "JudgerOutputBatch": "judger.core.judger",
    "JudgerPayload": "judger.core.judger",
    "JudgerPayloadBatch": "judger.core.judger",
    "RolloutState": "judger.core.rollout",
    "Status": "judger.core.rollout",
    "ComposedJudger": "judger.judgers.composed",
    "weighted_sum": "judger.judgers.composed",
    "ComposedJudgerConfig": "judger.judgers.config",
    "CPUResourcesConfig": "judger.judgers.config",
    "JudgerConfig": "judger.judgers.config",
    "build_judger": "judger.judgers.config",
    "batch_handler": "judger.judgers.handlers",
    "NativeJudger": "judger.judgers.native",
    "RemoteJudger": "judger.remote",
    "JudgerActor": "judger.remote",
    "JudgerPool": "judger.remote",
    "CPUResourceManager": "judger.remote",
    "CompassVerifierV2Config": "judger.verifiers",
}

_lazy = lazy_exports(__name__, _LAZY)


def __getattr__(name: str) -> Any:
    """A lazy name, or a preset: every preset :mod:`judger.presets` finds (its registry is the
    preset modules themselves) is exported here, and ``__all__`` lists them (asking for it loads
    every preset module, as ``judger.presets.__all__`` does)."""
    if name == "__all__":
        return sorted({*_LAZY, "JudgerError", "__version__", *_presets().preset_names()})
    if name not in _LAZY and name.endswith("JudgerConfig"):
        value = getattr(_presets(), name, None)
        if value is not None:
            globals()[name] = value
            return value
    return _lazy(name)


def _presets() -> Any:
    import judger.presets

    return judger.presets


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | {"__all__"})


if TYPE_CHECKING:  # for checkers and linters; at run time __getattr__ above adds the presets
    __all__ = [
        "BaseJudger",
        "CPUResourceManager",
        "CPUResourcesConfig",
        "CompassVerifierV2Config",
        "ComposedJudger",
        "ComposedJudgerConfig",
        "Judger",
        "JudgerActor",
        "JudgerConfig",
        "JudgerError",
        "JudgerOutput",
        "JudgerOutputBatch",
        "JudgerPayload",
        "JudgerPayloadBatch",
        "JudgerPool",
        "NativeJudger",
        "RemoteJudger",
        "RolloutState",
        "Status",
        "__version__",
        "batch_handler",
        "build_judger",
        "weighted_sum",
    ]
