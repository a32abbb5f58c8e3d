"""The trainer side: the seed's data path (sampler, rollout controller, agent loop, replay buffer,
task specs), train data, verl-compatible validation metrics, rollout files."""

from __future__ import annotations

from judger.core.lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:  # the lazy names below, for type checkers, IDEs and the API reference
    from judger.trainer.agent_loop import SingleTurnAgentLoop, SingleTurnAgentLoopConfig, run_judger
    from judger.trainer.agent_loop_manager import AgentLoopManager, AgentLoopManagerConfig
    from judger.trainer.controller import RolloutController, RolloutControllerConfig
    from judger.trainer.io import example_data, read_rollouts, write_rollouts
    from judger.trainer.metrics import process_validation_metrics
    from judger.trainer.replay_buffer import ReplayBuffer, ReplayBufferConfig
    from judger.trainer.sample_params import SampleParams
    from judger.trainer.sampler import Sampler, SamplerConfig
    from judger.trainer.task import TaskSpecConfig
    from judger.trainer.training import prepare_train_data

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

# a literal list, so that linters and the API reference read it without running this file
__all__ = [
    "AgentLoopManager",
    "AgentLoopManagerConfig",
    "ReplayBuffer",
    "ReplayBufferConfig",
    "RolloutController",
    "RolloutControllerConfig",
    "SampleParams",
    "Sampler",
    "SamplerConfig",
    "SingleTurnAgentLoop",
    "SingleTurnAgentLoopConfig",
    "TaskSpecConfig",
    "example_data",
    "prepare_train_data",
    "process_validation_metrics",
    "read_rollouts",
    "run_judger",
    "write_rollouts",
]

__getattr__ = lazy_exports(__name__, _NAMES)
