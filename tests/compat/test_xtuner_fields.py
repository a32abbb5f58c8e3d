"""XTuner's resource-manager functions, config fields and RolloutState fields."""

from __future__ import annotations

import numpy as np
import pytest

from judger import CPUResourcesConfig, RolloutState
from judger.remote.resources import (
    ClusterCapacity,
    CPUResourceManager,
    clear_cpu_resource_manager,
    get_cpu_resource_manager,
    register_cpu_resources,
    set_cpu_resource_manager,
)
from judger.trainer.agent_loop import SingleTurnAgentLoopConfig

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

GIB = 1024**3


def four_cpus() -> ClusterCapacity:
    return ClusterCapacity(4.0, 8.0 * GIB, 0.0, 0.0, 4.0, 8.0 * GIB)


def test_xtuners_resource_manager_functions() -> None:
    previous = get_cpu_resource_manager()
    try:
        manager = CPUResourceManager(accelerator_placement_groups=None, capacity=four_cpus)
        set_cpu_resource_manager(manager)
        assert get_cpu_resource_manager() is manager and CPUResourceManager.instance() is manager
        two = CPUResourcesConfig(num_workers=2, num_cpus_per_worker=1)
        name = register_cpu_resources("judger:gsm8k", two)
        assert name == "judger:gsm8k" and manager.get(name).num_workers == 2 and list(manager.pools) == [name]
        assert register_cpu_resources("judger:gsm8k", CPUResourcesConfig()) == "judger:gsm8k#2"
        with pytest.raises(RuntimeError, match="Insufficient CPU resources"):
            register_cpu_resources("judger:big", two)
        assert sorted(manager.pools) == ["judger:gsm8k", "judger:gsm8k#2"]  # the failed one rolled back
        with pytest.raises(KeyError, match="Unknown external CPU resource pool"):
            manager.get("judger:big")
        clear_cpu_resource_manager()
        assert get_cpu_resource_manager() is None
    finally:
        set_cpu_resource_manager(previous)


def test_pg_pack_strategy() -> None:
    assert CPUResourcesConfig(pg_pack_strategy="SPREAD").pg_pack_strategy == "SPREAD"
    with pytest.raises(ValueError, match="'PACK' is not honoured: judger actors are not placed"):
        CPUResourcesConfig(pg_pack_strategy="PACK")
    with pytest.raises(ValueError, match="must be one of"):
        CPUResourcesConfig(pg_pack_strategy="TIGHT")


def test_rollout_state_takes_xtuners_fields() -> None:
    state = RolloutState(
        message=[{"role": "user", "content": "q"}],
        uid=7,
        mm_info={"pixel_values": np.zeros((2, 3)), "num_img_tokens": [4]},
        routed_experts=np.zeros((3, 2), dtype=np.int32),
        position_ids=np.arange(5),
        response_model_steps=[3, 3, 4],
        proxy_attn_flops=1.5e9,
    )
    assert state.rollout_id == 7 and state.uid == 7  # XTuner's deprecated alias, kept equal
    assert RolloutState(rollout_id=3).uid == 3
    assert state.routed_experts.shape == (3, 2) and state.response_model_steps == [3, 3, 4]
    copy = state.model_copy(deep=True)
    assert copy.mm_info is not None and copy.mm_info["num_img_tokens"] == [4]


def test_single_turn_agent_loop_config_takes_hf_checkpoint() -> None:
    assert SingleTurnAgentLoopConfig(hf_checkpoint="/models/qwen").hf_checkpoint == "/models/qwen"


class _JudgePayload:
    """XTuner's actor protocol: ``judge_payload.remote(payload)`` (here a coroutine, as in its tests)."""

    async def remote(self, payload: dict) -> dict:
        import asyncio

        if payload["response"] == "boom":
            raise RuntimeError("actor exploded")
        if payload["response"] == "hang":
            await asyncio.sleep(60)
        return {"score": float(payload["response"] == payload["label"])}


class _XTunerActor:
    def __init__(self) -> None:
        self.judge_payload = _JudgePayload()


async def test_remote_judger_in_xtuners_form_isolates_failures_and_hangs() -> None:
    from judger import RemoteJudger, Status

    judger = RemoteJudger(_XTunerActor(), judger_name="xt", call_timeout=0.5, max_retries=0)
    assert judger.judger_name == "xt" and isinstance(judger.actor, _XTunerActor)
    label = {"ground_truth": "7"}
    states = [RolloutState(message=[], response=r, reward_model=label) for r in ("7", "boom", "hang")]
    out = await judger.batch_judge(states)
    assert out[0].reward == {"score": 1.0}
    assert out[1].status is Status.FAILED and "actor exploded" in (out[1].error_msg or "")
    assert out[2].status is Status.FAILED and "timeout" in (out[2].error_msg or "")
    await judger.aclose()


@pytest.mark.slow
@pytest.mark.ray
async def test_remote_judger_in_xtuners_form_over_real_ray_actors(ray_cluster: object) -> None:
    import ray

    from judger import JudgerPool, RemoteJudger, Status
    from judger.remote.cluster import spawn_actor
    from judger.testing.ray import ToolJudgerConfig
    from judger.testing.xtuner import XTunerJudgerActor

    cfg = ToolJudgerConfig(judger_name="tool")
    # an actor of XTuner's protocol (only judge_payload) and one of judger's own JudgerActor
    xtuner_actor = ray.remote(XTunerJudgerActor).options(num_cpus=0.1).remote(cfg)
    judger_actor = spawn_actor(cfg, num_cpus=0.1, memory=None, max_concurrency=16)
    replicas = [
        RemoteJudger(actor, judger_name="tool", preprocess_judger=cfg.build_local())
        for actor in (xtuner_actor, judger_actor)
    ]
    pool = JudgerPool(replicas=replicas, judger_name="tools")
    label = {"ground_truth": "7"}
    states = [
        RolloutState(message=[], response=r, reward_model=label, extra_fields={"tool_trace": ["calc"]})
        for r in ("7", "8", "boom", "7")
    ]
    out = await pool.batch_judge(states)
    # ToolJudger's own preprocess / postprocess ran on the driver, its judge_payload in the actors
    assert [s.reward["score"] if s.reward else None for s in out] == [0.9, -0.1, None, 0.9]
    assert out[0].reward is not None and out[0].reward["tools_used"] == ["calc"]
    assert out[2].status is Status.FAILED and "cannot parse answer 'boom'" in (out[2].error_msg or "")
    assert set(pool.get_worker_status()) == {"tools[0]", "tools[1]"}
    await pool.aclose()


class _DiesOnceActor:
    """XTuner's protocol; the actor is lost (RayActorError) on its first call, as a crashed Ray actor."""

    def __init__(self) -> None:
        self.calls = 0
        outer = self

        class JudgePayload:
            async def remote(self, payload: dict) -> dict:
                from ray.exceptions import RayActorError

                outer.calls += 1
                if outer.calls == 1:
                    raise RayActorError()
                return {"score": float(payload["response"] == payload["label"])}

        self.judge_payload = JudgePayload()


async def test_remote_judger_in_xtuners_form_retries_a_lost_actor_in_batch_judge() -> None:
    from judger import RemoteJudger, Status

    actor = _DiesOnceActor()
    judger = RemoteJudger(actor, judger_name="xt", call_timeout=5.0, max_retries=1)
    state = RolloutState(message=[], response="7", reward_model={"ground_truth": "7"})
    (out,) = await judger.batch_judge([state])
    # the lost call is retried, as judge() and JudgerActor replicas do; not a FAILED sample
    assert out.status is not Status.FAILED, out.error_msg
    assert out.reward == {"score": 1.0} and actor.calls == 2
    await judger.aclose()
