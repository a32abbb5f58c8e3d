"""TaskSpecConfig: one training task, its own sampler, agent loop and judger, and its sampling weight."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from judger.judgers.config import ComposedJudgerConfig, JudgerConfig
from judger.trainer.agent_loop import SingleTurnAgentLoopConfig
from judger.trainer.sampler import SamplerConfig


class TaskSpecConfig(BaseModel):
    """As XTuner's: ``TaskSpecConfig(task_name, agent_loop_config, judger_config, sampler_config)``.

    The group size is the sampler's ``n``; an agent loop ``group_size`` that says otherwise is
    refused rather than silently overridden.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    task_name: str = Field(
        min_length=1, description="the task's name, on its samples (RolloutState.task_name)"
    )
    agent_loop_config: SingleTurnAgentLoopConfig = Field(
        description="how a group is generated: the policy's sampling parameters and model"
    )
    judger_config: JudgerConfig | ComposedJudgerConfig = Field(
        description="the judger that scores this task's samples"
    )
    sampler_config: SamplerConfig = Field(
        description="where this task's prompts come from, and n samples per prompt"
    )
    weight: float = Field(1.0, gt=0, description="how often this task is drawn, relative to the others")

    @model_validator(mode="after")
    def _group_size(self) -> TaskSpecConfig:
        size = self.agent_loop_config.group_size
        if size != 1 and size != self.sampler_config.n:
            raise ValueError(
                f"task {self.task_name!r}: agent_loop_config.group_size={size} but sampler_config.n="
                f"{self.sampler_config.n}; the sampler's n is the group size, set it there"
            )
        return self
