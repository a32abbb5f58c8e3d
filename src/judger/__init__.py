"""judger: score LLM rollouts for RL post-training.

``RolloutState`` in, ``state.reward`` (a dict with a numeric ``score``) out.
"""

from judger.core.errors import HandlerHTTPError, JudgerError, JudgerOutputError, JudgeTimeoutError
from judger.core.failure import JudgeFailure
from judger.core.judger import (
    BaseJudger,
    Judger,
    JudgerOutput,
    JudgerOutputBatch,
    JudgerPayload,
    JudgerPayloadBatch,
    gather_bounded,
)
from judger.core.rollout import RolloutState, Status
from judger.judgers.composed import ComposedJudger, weighted_sum
from judger.judgers.config import ComposedJudgerConfig, CPUResourcesConfig, JudgerConfig, build_judger
from judger.judgers.handlers import batch_handler
from judger.judgers.native import NativeJudger

__version__ = "0.1.0"

# Heavier parts (Ray, FastAPI, Math-Verify, pyarrow) load on first use, so ``import judger`` stays
# fast and works with only the core dependencies installed.
_LAZY: dict[str, str] = {
    # Ray execution
    "RemoteJudger": "judger.remote.remote_judger",
    "JudgerActor": "judger.remote.actor",
    "JudgerPool": "judger.remote.pool",
    "CPUResourceManager": "judger.remote.resources",
    # hang-proof process execution
    "ProcessPool": "judger.runtime.procpool.pool",
    # built-in judgers
    "GSM8KJudgerConfig": "judger.presets",
    "MathJudgerConfig": "judger.presets",
    "MathVerifyJudgerConfig": "judger.presets",
    "DapoMathJudgerConfig": "judger.presets",
    "GEO3KJudgerConfig": "judger.presets",
    "QAExactMatchJudgerConfig": "judger.presets",
    "CodeJudgerConfig": "judger.presets",
    # LLM verifiers
    "CompassVerifierV2Config": "judger.verifiers",
    "LLMJudgerConfig": "judger.verifiers",
    "CascadeJudgerConfig": "judger.verifiers",
    # trainer side
    "prepare_train_data": "judger.trainer.training",
    "SingleTurnAgentLoop": "judger.trainer.agent_loop",
    "SingleTurnAgentLoopConfig": "judger.trainer.agent_loop",
    "run_judger": "judger.trainer.agent_loop",
    "NaiveRewardManager": "judger.compat.verl.reward_managers",
    "DapoRewardManager": "judger.compat.verl.reward_managers",
    "BatchRewardManager": "judger.compat.verl.reward_managers",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'judger' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "BaseJudger",
    "CPUResourcesConfig",
    "ComposedJudger",
    "ComposedJudgerConfig",
    "HandlerHTTPError",
    "JudgeFailure",
    "JudgeTimeoutError",
    "Judger",
    "JudgerConfig",
    "JudgerError",
    "JudgerOutput",
    "JudgerOutputBatch",
    "JudgerOutputError",
    "JudgerPayload",
    "JudgerPayloadBatch",
    "NativeJudger",
    "RolloutState",
    "Status",
    "__version__",
    "batch_handler",
    "build_judger",
    "gather_bounded",
    "weighted_sum",
    *_LAZY,
]
