"""Judgers with known behaviour for testing Ray execution: a custom Judger subclass with its own
preprocess/postprocess, and judgers that kill or block their actor on chosen payloads.

They live in the package (not in tests/) so Ray worker processes can import them by name.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import Field

from judger.core.judger import Judger, JudgerOutput, JudgerOutputBatch, JudgerPayload, JudgerPayloadBatch
from judger.core.rollout import RolloutState
from judger.judgers.config import CPUResourcesConfig, JudgerConfig

# small reservations, so that several actors fit a 2-CPU test cluster next to other work
SMALL = {"num_cpus_per_worker": 0.1, "cpu_memory_per_worker": 64 * 1024**2}


def small_resources(num_workers: int) -> CPUResourcesConfig:
    return CPUResourcesConfig(num_workers=num_workers, **SMALL)


# --- a custom Judger subclass with its own preprocess / postprocess -------------------------------


class ToolJudger(Judger):
    """Scores a tool-using rollout from fields the default payload does not carry."""

    def preprocess(self, rollout_state: RolloutState) -> JudgerPayload:
        return {
            "answer": (rollout_state.response or "").strip(),
            "label": rollout_state.ground_truth,
            "tools": len(rollout_state.extra_fields.get("tool_trace", [])),
        }

    async def judge_payload(self, payload: JudgerPayloadBatch) -> JudgerOutputBatch:
        if isinstance(payload, list):
            return [self._score(p) for p in payload]
        return self._score(payload)

    @staticmethod
    def _score(payload: JudgerPayload) -> JudgerOutput:
        if payload["answer"] == "boom":
            raise ValueError(f"cannot parse answer {payload['answer']!r}")
        correct = payload["answer"] == str(payload["label"])
        return {"score": float(correct) - 0.1 * payload["tools"], "correct": correct}

    def postprocess(self, rollout_state: RolloutState, output: JudgerOutput) -> RolloutState:
        rollout_state.reward = {**output, "tools_used": rollout_state.extra_fields.get("tool_trace", [])}
        rollout_state.extra_fields["postprocessed_in"] = os.getpid()
        return rollout_state


class ToolJudgerConfig(JudgerConfig):
    judger_name: str = "tool_judger"

    def build_local(self) -> ToolJudger:
        return ToolJudger(self.judger_name, on_error=self.on_error, timeout=self.timeout)


def tool_states(n: int) -> list[RolloutState]:
    states = []
    for i in range(n):
        answer = "boom" if i % 17 == 5 else str(i % 4)
        states.append(
            RolloutState(
                message=[{"role": "user", "content": f"q{i}"}],
                response=answer,
                reward_model={"ground_truth": "1"},
                extra_fields={"tool_trace": ["search"] * (i % 3)},
                data_source="tools",
            )
        )
    return states


# --- judgers that misbehave on purpose ------------------------------------------------------------


class FaultyJudger(Judger):
    """Scores ``{"score": id}``; on the ``fault_ids`` payloads it kills its process or blocks it.

    ``once=True`` faults only the first time (a flag file per id under ``flag_dir`` remembers it),
    so the retry on another replica succeeds; otherwise it faults every time. ``delay`` is spent
    per payload (async, so the actor stays responsive) to make batches take a while.
    """

    def __init__(self, fault: str, fault_ids: list[int], flag_dir: str, once: bool, delay: float, **kw: Any):
        super().__init__("faulty", **kw)
        self.fault, self.fault_ids, self.flag_dir, self.once, self.delay = (
            fault,
            fault_ids,
            flag_dir,
            once,
            delay,
        )

    def preprocess(self, rollout_state: RolloutState) -> JudgerPayload:
        return {"id": rollout_state.extra_fields["id"]}

    async def judge_payload(self, payload: JudgerPayloadBatch) -> JudgerOutputBatch:
        items = payload if isinstance(payload, list) else [payload]
        outputs = []
        for item in items:
            if self.delay:
                await asyncio.sleep(self.delay)
            if item["id"] in self.fault_ids:
                self._maybe_fault(item["id"])
            outputs.append({"score": float(item["id"]), "pid": os.getpid()})
        return outputs if isinstance(payload, list) else outputs[0]

    def _maybe_fault(self, sample_id: int) -> None:
        flag = Path(self.flag_dir) / f"faulted-{sample_id}"
        if self.once and flag.exists():
            return
        flag.write_text(str(os.getpid()))
        if self.fault == "kill":
            os._exit(1)
        time.sleep(3600)  # blocks the actor's event loop: only the driver's deadline can end this


class FaultyJudgerConfig(JudgerConfig):
    judger_name: str = "faulty"
    fault: str = "kill"
    fault_ids: list[int] = Field(default_factory=list)
    flag_dir: str = ""
    once: bool = True
    delay: float = 0.0

    def build_local(self) -> FaultyJudger:
        return FaultyJudger(
            self.fault, self.fault_ids, self.flag_dir, self.once, self.delay, timeout=self.timeout
        )


def id_states(n: int) -> list[RolloutState]:
    return [RolloutState(message=[], response=str(i), extra_fields={"id": i}) for i in range(n)]


class SleepJudger(Judger):
    """``{"score": 1, "peak": n}`` after ``delay`` seconds per payload, one payload after another.

    ``peak`` is the most payloads this process has held at once so far (a backpressure probe).
    """

    def __init__(self, delay: float, **kw: Any) -> None:
        super().__init__("sleepy", **kw)
        self.delay = delay
        self.active = 0
        self.peak = 0

    async def judge_payload(self, payload: JudgerPayloadBatch) -> JudgerOutputBatch:
        items = payload if isinstance(payload, list) else [payload]
        self.active += len(items)
        self.peak = max(self.peak, self.active)
        try:
            for _ in items:
                await asyncio.sleep(self.delay)
        finally:
            self.active -= len(items)
        outputs = [{"score": 1.0, "peak": self.peak, "pid": os.getpid()} for _ in items]
        return outputs if isinstance(payload, list) else outputs[0]


class SleepJudgerConfig(JudgerConfig):
    judger_name: str = "sleepy"
    delay: float = 0.0

    def build_local(self) -> SleepJudger:
        return SleepJudger(self.delay, timeout=self.timeout)


def fail_on_seven(response: str | None, label: Any, extra_info: dict[str, Any]) -> dict[str, Any]:
    """A plain reward function that raises on one input."""
    if response == "7":
        raise ValueError("seven is not allowed")
    return {"score": float(response == str(label))}


# --- a cluster of several nodes on this machine ---------------------------------------------------

# GCS health checks every 0.5 s, a node declared dead after 3 missed: a test that removes a node sees
# its actors' calls fail within seconds, not after Ray's production default of 15 s or more
_FAST_NODE_DEATH = {
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 500,
    "health_check_failure_threshold": 3,
}


@contextmanager
def local_cluster(nodes: int = 2, cpus_per_node: int = 1) -> Iterator[Any]:
    """A Ray cluster of ``nodes`` nodes on this machine (``ray.cluster_utils.Cluster``), which this
    process does not join: give ``cluster.address`` to the command or the driver under test, and
    ``cluster.remove_node(node)`` one of ``cluster.worker_nodes`` to lose it.

    Ray's note of "the latest cluster" (``/tmp/ray/ray_current_cluster``, which a plain
    ``ray.init()`` of any process on the machine would then join, even after this one is gone) is
    not written: other tests and sessions here keep starting Rays of their own.
    """
    import ray._private.utils
    from ray.cluster_utils import Cluster

    write = ray._private.utils.write_ray_address
    ray._private.utils.write_ray_address = lambda *args, **kwargs: None
    try:
        cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": cpus_per_node,
                "include_dashboard": False,
                "_system_config": _FAST_NODE_DEATH,
            },
        )
    finally:
        ray._private.utils.write_ray_address = write
    try:
        for _ in range(nodes - 1):
            cluster.add_node(num_cpus=cpus_per_node)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        cluster.shutdown()


def actors_by_node(cluster: Any, class_name: str) -> dict[str, list[dict[str, Any]]]:
    """The cluster's actors of ``class_name`` (any state, any job) by the id of the node they ran on."""
    found: dict[str, list[dict[str, Any]]] = {}
    for info in cluster.global_state.actor_table(None).values():
        if info["ActorClassName"] == class_name:
            found.setdefault(info["Address"]["NodeID"], []).append(info)
    return found
