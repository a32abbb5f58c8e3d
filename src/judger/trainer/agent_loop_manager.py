"""AgentLoopManager: several tasks drawn by weight, generated and judged into a ReplayBuffer.

``AgentLoopManagerConfig(tasks=[TaskSpecConfig(...)], rollout_config=RolloutControllerConfig(...))
.build()`` builds, for every task, its sampler, its ``SingleTurnAgentLoop`` over the shared
:class:`~judger.trainer.controller.RolloutController`, and its judger with
``build_judger(task_cfg.judger_config)`` (local, or on Ray actors with ``cpu_resources``), as
XTuner's does. ``await manager.produce_batch(batch_size)`` generates and judges groups (each from
a task drawn by weight; at most ``max_concurrent_groups`` in flight) until the replay buffer holds
``batch_size`` trainable groups, then hands those to the caller for ``prepare_train_data``. Groups
that failed or were aborted stay in ``manager.replay_buffer.failed`` with their reason.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import Counter
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from judger.core.errors import GenerationError
from judger.core.judger import BaseJudger
from judger.core.rollout import RolloutState, Status
from judger.judgers import config as judger_configs
from judger.trainer.agent_loop import SingleTurnAgentLoop
from judger.trainer.controller import RolloutController, RolloutControllerConfig
from judger.trainer.replay_buffer import ReplayBuffer, ReplayBufferConfig
from judger.trainer.sampler import Sampler
from judger.trainer.task import TaskSpecConfig
from judger.trainer.token_ids import ResponseTokenizer, missing_training_ids

logger = logging.getLogger(__name__)


class AgentLoopManagerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tasks: list[TaskSpecConfig] = Field(
        min_length=1, description="the tasks batches are drawn from, each by its weight"
    )
    rollout_config: RolloutControllerConfig = Field(
        description="the policy servers and how requests go to them"
    )
    replay_buffer_config: ReplayBufferConfig = Field(
        default_factory=ReplayBufferConfig,
        description=(
            "where judged groups wait until a batch is taken (and an optional sink that keeps every group)"
        ),
    )
    max_concurrent_groups: int = Field(64, ge=1, description="groups generated and judged at once")
    max_attempts_factor: int = Field(
        4, ge=1, description="produce_batch gives up after batch_size x this many groups without a batch"
    )
    seed: int = Field(0, description="seed of the draw of tasks by weight")

    @field_validator("tasks", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, TaskSpecConfig) else value

    @field_validator("tasks")
    @classmethod
    def _unique_names(cls, tasks: list[TaskSpecConfig]) -> list[TaskSpecConfig]:
        names = [t.task_name for t in tasks]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"tasks: task_name {dupes} used more than once")
        return tasks

    def build(self, tokenizer: Any = None) -> AgentLoopManager:

        models = {m for t in self.tasks if (m := t.agent_loop_config.served_model()) is not None}
        if self.rollout_config.model is None and len(models) > 1:
            raise ValueError(
                f"tasks name different models {sorted(models)} (hf_checkpoint / model) for one "
                "rollout controller; set rollout_config.model"
            )
        first = self.tasks[0].agent_loop_config
        if tokenizer is None:
            tokenizer = first.load_tokenizer()
        _refuse_without_tokenizer(self.rollout_config, tokenizer, first.hf_checkpoint)
        controller = self.rollout_config.build(
            model=self.rollout_config.model or first.served_model(),
            tokenize_response=ResponseTokenizer(tokenizer)
            if self.rollout_config.tokenize_responses
            else None,
        )
        tasks: list[Task] = []
        try:
            for spec in self.tasks:
                sampler = spec.sampler_config.build(tokenizer=tokenizer)
                judger = judger_configs.build_judger(spec.judger_config)
                loop = SingleTurnAgentLoop(spec.agent_loop_config, controller, judger)
                tasks.append(Task(spec, sampler, loop, judger))
        except BaseException:
            for task in tasks:
                _close_quietly(task.judger)
            raise
        return AgentLoopManager(self, tasks, controller, self.replay_buffer_config.build())


def _refuse_without_tokenizer(
    rollout: RolloutControllerConfig, tokenizer: Any, checkpoint: str | None
) -> None:
    """What needs the policy's tokenizer is refused at build when there is none (no local one at
    hf_checkpoint, none passed to build): never untemplated prompts, never a silent fallback."""
    if tokenizer is not None:
        return
    where = (
        f"hf_checkpoint={checkpoint!r} gives no local tokenizer" if checkpoint else "no hf_checkpoint is set"
    )
    if rollout.endpoint == "completions":
        raise ValueError(
            "rollout_config.endpoint='completions' sends each prompt under the policy's chat template, "
            f"and {where}: set hf_checkpoint to the policy's local model folder (or build(tokenizer=...)), "
            "or use endpoint='chat' (the server applies its own template)"
        )
    if rollout.tokenize_responses:
        raise ValueError(
            f"rollout_config.tokenize_responses=True tokenizes responses with the policy's tokenizer, and "
            f"{where}: set hf_checkpoint to the policy's local model folder (or build(tokenizer=...))"
        )


def _reason_of(state: RolloutState, group_reason: str) -> str:
    """A failed sample's own error message (its first line, cut short), else its group's reason."""
    message = (state.error_msg or "").strip().splitlines()
    return message[0][:200] if message else group_reason


def _close_quietly(judger: BaseJudger) -> None:
    closer = getattr(judger, "close", None)
    if closer is not None:
        try:
            closer()
        except Exception:
            pass


@dataclass
class Task:
    spec: TaskSpecConfig
    sampler: Sampler
    agent_loop: SingleTurnAgentLoop
    judger: BaseJudger
    exhausted: bool = False


class AgentLoopManager:
    def __init__(
        self,
        config: AgentLoopManagerConfig,
        tasks: list[Task],
        controller: RolloutController,
        replay_buffer: ReplayBuffer,
    ) -> None:
        self.config = config
        self.tasks = tasks
        self.controller = controller
        self.replay_buffer = replay_buffer
        self._rng = random.Random(config.seed)
        self.groups_started = 0
        # whether a completed sample has shown that the server's replies carry the token ids
        # training needs: until then one group goes first, alone
        self.token_ids_checked = False

    def _draw(self) -> tuple[Task, list[RolloutState]] | None:
        while True:
            live = [t for t in self.tasks if not t.exhausted]
            if not live:
                return None
            task = self._rng.choices(live, weights=[t.spec.weight for t in live])[0]
            group = task.sampler.next_group()
            if group is None:
                task.exhausted = True
                continue
            for state in group:
                state.task_name = task.spec.task_name
            return task, group

    async def produce_batch(self, batch_size: int) -> list[list[RolloutState]]:
        """``batch_size`` judged, trainable groups (fewer only when every sampler ran out cleanly).

        Raises GenerationError at once when the servers list models but not the configured one
        (naming both), and at the first completed sample without token ids to train on (the first
        group goes alone, so that a server returning text only is found on its first reply;
        :mod:`judger.trainer.token_ids`); RuntimeError, with the failure counts and the most common
        reasons, after
        ``batch_size * max_attempts_factor`` groups went out without filling the batch (a dead
        server, a broken judger...), and when the samplers ran out short of ``batch_size`` while
        groups of this call failed: a short batch then hides a broken run. A short batch at the
        clean end of the data is returned, with a warning.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        # a served name that differs from the configured one is refused here, naming both, before
        # any group is generated (GenerationError)
        await self.controller.resolve_model()
        in_flight: set[asyncio.Task[list[RolloutState]]] = set()
        budget = batch_size * self.config.max_attempts_factor
        started = 0
        failed_before = len(self.replay_buffer.failed)
        try:
            while len(self.replay_buffer) < batch_size:
                want = min(self.config.max_concurrent_groups, batch_size - len(self.replay_buffer))
                if self.groups_started == 0:
                    want = 1  # the first reply tells whether the server gives token ids
                while len(in_flight) < want and started < budget:
                    drawn = self._draw()
                    if drawn is None:
                        break
                    task, group = drawn
                    in_flight.add(asyncio.ensure_future(task.agent_loop.generate_group(group)))
                    started += 1
                    self.groups_started += 1
                if not in_flight:
                    if started >= budget:
                        raise RuntimeError(
                            f"produce_batch: {started} groups generated, {len(self.replay_buffer)} of "
                            f"{batch_size} trainable; {self._failure_summary()}"
                        )
                    if len(self.replay_buffer.failed) > failed_before:
                        raise RuntimeError(
                            f"produce_batch: every sampler ran out after {started} groups, "
                            f"{len(self.replay_buffer)} of {batch_size} trainable; {self._failure_summary()}"
                        )
                    if len(self.replay_buffer) < batch_size:
                        logger.warning(
                            "produce_batch: every sampler ran out; %d of %d groups",
                            len(self.replay_buffer),
                            batch_size,
                        )
                    break  # every sampler ran out
                done, in_flight = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
                for fut in done:
                    self._check_token_ids(fut.result())
                    self.replay_buffer.add(fut.result())
            # groups still out when the batch filled are kept for the next batch, not thrown away
            for group in await asyncio.gather(*in_flight):
                self.replay_buffer.add(group)
            in_flight = set()
        finally:
            for fut in in_flight:
                fut.cancel()
            if in_flight:
                await asyncio.gather(*in_flight, return_exceptions=True)
        return self.replay_buffer.sample(batch_size)

    def _check_token_ids(self, group: list[RolloutState]) -> None:
        """Stop at the first completed sample without the token ids training needs (the in-flight
        groups are cancelled by produce_batch), rather than after every group is generated and
        judged for nothing."""
        if self.token_ids_checked:
            return
        problem = missing_training_ids(group)
        if problem is not None:
            raise GenerationError(f"produce_batch: {problem}")
        self.token_ids_checked = any(s.status == Status.COMPLETED for s in group)

    def failure_reasons(self, top: int = 3) -> list[tuple[str, int]]:
        """The ``top`` most common error messages of the samples of failed groups, with counts."""
        reasons: Counter[str] = Counter()
        for failed in self.replay_buffer.failed:
            for state in failed.group:
                reasons[_reason_of(state, failed.reason)] += 1
        return reasons.most_common(top)

    def _failure_summary(self) -> str:
        reasons = "; ".join(f"{count}x {reason}" for reason, count in self.failure_reasons())
        return (
            f"failed groups by reason: {self.replay_buffer.failure_counts()}; "
            f"most common sample errors: {reasons or 'none recorded'}"
        )

    def stats(self) -> dict[str, Any]:
        return {
            "groups_started": self.groups_started,
            "ready": len(self.replay_buffer),
            "failed": self.replay_buffer.failure_counts(),
            "servers": self.controller.server_states(),
            "requests": self.controller.stats.requests,
            "retries": self.controller.stats.retries,
        }

    async def aclose(self) -> None:
        await self.controller.aclose()
        for task in self.tasks:
            await task.judger.aclose()
        self.replay_buffer.close()
