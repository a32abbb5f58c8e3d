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


def _more(name: str) -> object:
    """Past the lazy names: ``__all__`` (the API, every preset that :mod:`judger.presets` finds
    included: asking for it loads every preset module), and any preset by its class name."""
    import judger.presets as presets

    if name == "__all__":
        return _names()
    if name.endswith("JudgerConfig"):
        try:
            return getattr(presets, name)
        except AttributeError:
            pass  # named as judger's, below
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _names() -> list[str]:
    import judger.presets as presets

    return sorted({*_LAZY, "JudgerError", "__version__", *presets.preset_names()})


__getattr__ = lazy_exports(__name__, _LAZY, fallback=_more)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_names()))


# for checkers and linters; at run time __getattr__ answers __all__, every preset included
if TYPE_CHECKING:
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
