"""The seed's data path end to end against fake servers on 127.0.0.1:
Sampler -> SingleTurnAgentLoop -> RolloutController -> judger -> ReplayBuffer -> prepare_train_data."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import judger.judgers.config as judger_configs
from judger.core.rollout import Status
from judger.testing.fake_openai import PolicyServer
from judger.trainer.agent_loop_manager import AgentLoopManager, AgentLoopManagerConfig
from judger.trainer.controller import RolloutControllerConfig
from judger.trainer.io import example_data
from judger.trainer.replay_buffer import ReplayBufferConfig, read_sink
from judger.trainer.sample_params import SampleParams
from judger.trainer.sampler import SamplerConfig
from judger.trainer.training import prepare_train_data

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

POLICY = "/models/fake-policy"


def answer_key(sampler_config: SamplerConfig) -> dict[str, str]:
    """Prompt text (the fake's chat template of a one-message chat) -> ground truth."""
    return {s.message[0]["content"]: str(s.ground_truth) for s in sampler_config.build().prompts}


def gsm8k_responder(key: dict[str, str], right: Callable[[int], bool] = lambda j: j % 2 == 0):
    """Sample j of a prompt answers right when ``right(j)``, else a wrong number, in GSM8K's format."""

    def respond(prompt: str, j: int) -> str:
        truth = key.get(prompt, "0")
        return f"Let me think. #### {truth if right(j) else truth + '1'}"

    return respond


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def produce(manager: AgentLoopManager, batch_size: int) -> list[Any]:
    try:
        return await manager.produce_batch(batch_size)
    finally:
        await manager.aclose()


@pytest.mark.slow
@pytest.mark.ray
def test_seed_training_config_snippet_unchanged(policy: PolicyServer, ray_cluster: object) -> None:
    """The seed's TaskSpecConfig snippet, verbatim but for the import lines, builds and produces a
    judged batch (its GSM8K judger on a Ray actor, as cpu_resources asks)."""
    model_path = POLICY
    training_sample_params = SampleParams(max_tokens=256, temperature=1.0, top_p=1.0, top_k=0)
    sampler_config = SamplerConfig(data_files=example_data("gsm8k_test.jsonl"), n=4, limit=16)
    policy.fake.responder = gsm8k_responder(answer_key(sampler_config))

    # --- the seed's snippet: only the imports differ ---
    from judger.judgers.config import CPUResourcesConfig
    from judger.presets import GSM8KJudgerConfig
    from judger.trainer.agent_loop import SingleTurnAgentLoopConfig
    from judger.trainer.task import TaskSpecConfig

    judger_config = GSM8KJudgerConfig(
        judger_name="openai/gsm8k",
        cpu_resources=CPUResourcesConfig(
            num_workers=1,
            num_cpus_per_worker=1,
        ),
    )

    task_config = TaskSpecConfig(
        task_name="train_task",
        agent_loop_config=SingleTurnAgentLoopConfig(
            hf_checkpoint=model_path,
            sample_params=training_sample_params,
        ),
        judger_config=judger_config,
        sampler_config=sampler_config,
    )
    # --- end of the snippet ---

    from judger.remote.remote_judger import RemoteJudger
    from judger.remote.resources import CPUResourceManager

    before = CPUResourceManager.instance().registrations()
    manager = AgentLoopManagerConfig(
        tasks=[task_config], rollout_config=RolloutControllerConfig(base_urls=[policy.url])
    ).build()

    assert isinstance(manager.tasks[0].judger, RemoteJudger)  # build_judger honoured cpu_resources
    batch = run(produce(manager, 4))
    assert CPUResourceManager.instance().registrations() == before  # aclose released the actor's CPUs
    assert len(batch) == 4 and all(len(g) == 4 for g in batch)
    body = policy.fake.requests[-1]
    assert body["model"] == POLICY and body["max_tokens"] == 256 and body["n"] == 4
    for group in batch:
        assert [s.reward["score"] for s in group] == [1.0, 0.0, 1.0, 0.0]
        assert all(s.task_name == "train_task" and s.status == Status.COMPLETED for s in group)
    data = prepare_train_data(batch)
    assert len(data.samples) == 16 and not data.skipped
    assert {round(s.advantage, 3) for s in data.samples} == {0.866, -0.866}


def test_build_calls_build_judger_and_draws_tasks_by_weight(
    policy: PolicyServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from judger.presets import GSM8KJudgerConfig, QAExactMatchJudgerConfig
    from judger.trainer.agent_loop import SingleTurnAgentLoopConfig
    from judger.trainer.task import TaskSpecConfig

    gsm8k = SamplerConfig(data_files=example_data("gsm8k_test.jsonl"), n=2, limit=200)
    toy = tmp_path / "toy.jsonl"
    toy.write_text(
        "".join(
            f'{{"data_source": "toy", "prompt": "say {i}", "reward_model": {{"ground_truth": "say {i}"}}}}\n'
            for i in range(200)
        )
    )
    key = answer_key(gsm8k)
    math = gsm8k_responder(key)
    policy.fake.responder = lambda p, j: math(p, j) if p in key else f"<answer>{p}</answer>"
    built: list[Any] = []
    real = judger_configs.build_judger
    monkeypatch.setattr(judger_configs, "build_judger", lambda cfg: built.append(cfg) or real(cfg))
    loop = SingleTurnAgentLoopConfig(hf_checkpoint=POLICY, sample_params={"max_tokens": 64})
    tasks = [
        TaskSpecConfig(
            task_name="math", agent_loop_config=loop, judger_config=GSM8KJudgerConfig(), sampler_config=gsm8k
        ),
        TaskSpecConfig(
            task_name="echo",
            agent_loop_config=loop,
            judger_config=QAExactMatchJudgerConfig(),
            sampler_config=SamplerConfig(data_files=toy, n=2),
            weight=3.0,
        ),
    ]
    cfg = AgentLoopManagerConfig(
        tasks=tasks,
        rollout_config=RolloutControllerConfig(base_urls=[policy.url]),
        replay_buffer_config=ReplayBufferConfig(sink=tmp_path / "groups.jsonl"),
        max_concurrent_groups=16,
    )
    manager = cfg.build()
    assert [type(c).__name__ for c in built] == ["GSM8KJudgerConfig", "QAExactMatchJudgerConfig"]
    batch = run(produce(manager, 80))
    assert len(batch) == 80
    by_task = Counter(g[0].task_name for g in batch)
    assert 45 <= by_task["echo"] <= 75 and by_task["math"] == 80 - by_task["echo"], by_task
    for group in batch:
        expect = [1.0, 1.0] if group[0].task_name == "echo" else [1.0, 0.0]
        assert [s.reward["score"] for s in group] == expect
    assert len(list(read_sink(tmp_path / "groups.jsonl"))) >= 80  # every group also on disk
    data = prepare_train_data(batch)
    assert len(data.samples) == 160


def test_dataset_to_train_data_with_a_server_killed_halfway(two_policies: list[PolicyServer]) -> None:
    from judger.presets import GSM8KJudgerConfig
    from judger.trainer.agent_loop import SingleTurnAgentLoopConfig
    from judger.trainer.task import TaskSpecConfig

    sampler = SamplerConfig(data_files=example_data("gsm8k_test.jsonl"), n=4, limit=300)
    key = answer_key(sampler)
    for p in two_policies:
        p.fake.responder = gsm8k_responder(key, right=lambda j: j != 3)
        p.fake.delay = 0.01
    task = TaskSpecConfig(
        task_name="gsm8k",
        agent_loop_config=SingleTurnAgentLoopConfig(hf_checkpoint=POLICY),
        judger_config=GSM8KJudgerConfig(),
        sampler_config=sampler,
    )
    rollout = RolloutControllerConfig(
        base_urls=[p.url for p in two_policies], probe_interval=0.2, backoff_base=0.01, request_timeout=10
    )
    manager = AgentLoopManagerConfig(tasks=[task], rollout_config=rollout, max_concurrent_groups=16).build()

    def kill_halfway() -> None:
        deadline = time.monotonic() + 60
        while sum(p.fake.chat_requests for p in two_policies) < 150 and time.monotonic() < deadline:
            time.sleep(0.005)
        two_policies[0].kill()

    killer = threading.Thread(target=kill_halfway, daemon=True)
    killer.start()
    batch = run(produce(manager, 300))
    killer.join()
    assert len(batch) == 300 and not manager.replay_buffer.failed
    first, second = manager.controller.servers
    assert first.taken_out == 1 and not first.healthy and second.healthy
    assert 0 < two_policies[0].fake.chat_requests < two_policies[1].fake.chat_requests
    data = prepare_train_data(batch)
    assert len(data.samples) == 1200 and not data.skipped
    assert all(s.rollout_logprobs is not None for s in data.samples)


def test_failed_groups_are_kept_apart_with_their_reason(policy: PolicyServer) -> None:
    from judger.presets import GSM8KJudgerConfig
    from judger.trainer.agent_loop import SingleTurnAgentLoopConfig
    from judger.trainer.task import TaskSpecConfig

    sampler = SamplerConfig(data_files=example_data("gsm8k_test.jsonl"), n=2, limit=4, shuffle=False)
    key = answer_key(sampler)
    calls = Counter[str]()

    def respond(prompt: str, j: int) -> str:
        calls[prompt] += 1
        return gsm8k_responder(key)(prompt, j)

    policy.fake.responder = respond
    policy.fake.fail_first, policy.fake.fail_status = 1, 400  # the first request is refused: not retried
    task = TaskSpecConfig(
        task_name="t",
        agent_loop_config=SingleTurnAgentLoopConfig(hf_checkpoint=POLICY),
        judger_config=GSM8KJudgerConfig(),
        sampler_config=sampler,
    )
    manager = AgentLoopManagerConfig(
        tasks=[task], rollout_config=RolloutControllerConfig(base_urls=[policy.url]), max_concurrent_groups=1
    ).build()
    batch = run(produce(manager, 3))
    assert len(batch) == 3
    (failed,) = manager.replay_buffer.failed
    assert failed.reason == "failed" and "HTTP 400" in failed.group[0].error_msg
    assert all(s.reward is None for s in failed.group)


def test_a_batch_that_cannot_fill_says_why(policy: PolicyServer) -> None:
    from judger.presets import GSM8KJudgerConfig
    from judger.trainer.agent_loop import SingleTurnAgentLoopConfig
    from judger.trainer.task import TaskSpecConfig

    policy.fake.finish_reason = "abort"
    task = TaskSpecConfig(
        task_name="t",
        agent_loop_config=SingleTurnAgentLoopConfig(),
        judger_config=GSM8KJudgerConfig(),
        sampler_config=SamplerConfig(data_files=example_data("gsm8k_test.jsonl"), n=2, limit=50),
    )
    manager = AgentLoopManagerConfig(
        tasks=[task], rollout_config=RolloutControllerConfig(base_urls=[policy.url]), max_attempts_factor=2
    ).build()
    with pytest.raises(RuntimeError, match=r"'aborted': 8"):
        run(produce(manager, 4))


def test_group_size_conflict_is_refused() -> None:
    from judger.presets import GSM8KJudgerConfig
    from judger.trainer.agent_loop import SingleTurnAgentLoopConfig
    from judger.trainer.task import TaskSpecConfig

    with pytest.raises(ValueError, match="sampler's n is the group size"):
        TaskSpecConfig(
            task_name="t",
            agent_loop_config=SingleTurnAgentLoopConfig(group_size=8),
            judger_config=GSM8KJudgerConfig(),
            sampler_config=SamplerConfig(data_files=example_data("gsm8k_test.jsonl"), n=4),
        )
    loop = SingleTurnAgentLoopConfig(hf_checkpoint="/ckpt/qwen", sample_params={"max_tokens": 8})
    assert loop.served_model() == "/ckpt/qwen" and loop.sample_params.max_tokens == 8
    assert loop.load_tokenizer() is None  # no local tokenizer there: the server's token ids are used
    with pytest.raises(ValueError, match="temprature"):
        SingleTurnAgentLoopConfig(sample_params={"temprature": 0.5})


def test_samplers_running_out_with_every_group_failed_raises_with_reasons(policy: PolicyServer) -> None:
    """The samplers run out before the attempt budget while every group failed (the server refuses
    every request): produce_batch says so, with counts and the most common sample error, instead of
    returning an empty batch."""
    from judger.presets import GSM8KJudgerConfig
    from judger.trainer.agent_loop import SingleTurnAgentLoopConfig
    from judger.trainer.task import TaskSpecConfig

    policy.fake.fail_first, policy.fake.fail_status = 10**6, 400
    task = TaskSpecConfig(
        task_name="t",
        agent_loop_config=SingleTurnAgentLoopConfig(hf_checkpoint=POLICY),
        judger_config=GSM8KJudgerConfig(),
        sampler_config=SamplerConfig(data_files=example_data("gsm8k_test.jsonl"), n=2, limit=5),
    )
    manager = AgentLoopManagerConfig(
        tasks=[task], rollout_config=RolloutControllerConfig(base_urls=[policy.url]), max_attempts_factor=4
    ).build()
    with pytest.raises(
        RuntimeError,
        match=r"ran out.*0 of 4 trainable.*'failed': 5.*10x generation failed: .*HTTP 400",
    ):
        run(produce(manager, 4))


def test_a_short_batch_at_the_clean_end_of_the_data_is_returned(policy: PolicyServer) -> None:
    from judger.presets import GSM8KJudgerConfig
    from judger.trainer.agent_loop import SingleTurnAgentLoopConfig
    from judger.trainer.task import TaskSpecConfig

    sampler = SamplerConfig(data_files=example_data("gsm8k_test.jsonl"), n=2, limit=3)
    policy.fake.responder = gsm8k_responder(answer_key(sampler))
    task = TaskSpecConfig(
        task_name="t",
        agent_loop_config=SingleTurnAgentLoopConfig(hf_checkpoint=POLICY),
        judger_config=GSM8KJudgerConfig(),
        sampler_config=sampler,
    )
    manager = AgentLoopManagerConfig(
        tasks=[task], rollout_config=RolloutControllerConfig(base_urls=[policy.url])
    ).build()
    assert len(run(produce(manager, 4))) == 3


def test_a_served_model_name_mismatch_is_refused_before_any_group(policy: PolicyServer) -> None:
    from judger.core.errors import GenerationError
    from judger.presets import GSM8KJudgerConfig
    from judger.trainer.agent_loop import SingleTurnAgentLoopConfig
    from judger.trainer.task import TaskSpecConfig

    task = TaskSpecConfig(
        task_name="t",
        agent_loop_config=SingleTurnAgentLoopConfig(hf_checkpoint="/ckpt/other-model"),
        judger_config=GSM8KJudgerConfig(),
        sampler_config=SamplerConfig(data_files=example_data("gsm8k_test.jsonl"), n=2, limit=50),
    )
    manager = AgentLoopManagerConfig(
        tasks=[task], rollout_config=RolloutControllerConfig(base_urls=[policy.url])
    ).build()
    with pytest.raises(
        GenerationError, match=r"serves \['/models/fake-policy'\], not model '/ckpt/other-model'"
    ):
        run(produce(manager, 4))
    assert policy.fake.chat_requests == 0 and manager.groups_started == 0
