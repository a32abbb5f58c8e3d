"""The trainer side: train data, the agent loop, verl-compatible validation metrics, rollout files."""

from __future__ import annotations

import importlib

_NAMES: dict[str, str] = {
    "prepare_train_data": "judger.trainer.training",
    "SingleTurnAgentLoop": "judger.trainer.agent_loop",
    "SingleTurnAgentLoopConfig": "judger.trainer.agent_loop",
    "run_judger": "judger.trainer.agent_loop",
    "process_validation_metrics": "judger.trainer.metrics",
    "read_rollouts": "judger.trainer.io",
    "write_rollouts": "judger.trainer.io",
    "example_data": "judger.trainer.io",
}

__all__ = sorted(_NAMES)


def __getattr__(name: str) -> object:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'judger.trainer' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
