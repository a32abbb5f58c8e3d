"""The trainer side: the seed's data path (sampler, rollout controller, agent loop, replay buffer,
task specs), train data, verl-compatible validation metrics, rollout files."""

from __future__ import annotations

from judger.core.lazy import lazy_exports

_NAMES: dict[str, str] = {
    "prepare_train_data": "judger.trainer.training",
    "SingleTurnAgentLoop": "judger.trainer.agent_loop",
    "SingleTurnAgentLoopConfig": "judger.trainer.agent_loop",
    "run_judger": "judger.trainer.agent_loop",
    "process_validation_metrics": "judger.trainer.metrics",
    "read_rollouts": "judger.trainer.io",
    "write_rollouts": "judger.trainer.io",
    "example_data": "judger.trainer.io",
    # the seed's data path: Sampler -> RolloutController -> agent loop -> judger -> ReplayBuffer
    "SampleParams": "judger.trainer.sample_params",
    "SamplerConfig": "judger.trainer.sampler",
    "Sampler": "judger.trainer.sampler",
    "RolloutControllerConfig": "judger.trainer.controller",
    "RolloutController": "judger.trainer.controller",
    "ReplayBufferConfig": "judger.trainer.replay_buffer",
    "ReplayBuffer": "judger.trainer.replay_buffer",
    "TaskSpecConfig": "judger.trainer.task",
    "AgentLoopManagerConfig": "judger.trainer.agent_loop_manager",
    "AgentLoopManager": "judger.trainer.agent_loop_manager",
}

__all__ = sorted(_NAMES)

__getattr__ = lazy_exports(__name__, _NAMES)
