"""Remote and pooled judging give exactly the local results, and only payloads cross to actors."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from judger import (
    ComposedJudgerConfig,
    JudgerConfig,
    JudgerPool,
    RemoteJudger,
    RolloutState,
    Status,
    weighted_sum,
)
from judger.testing.ray import ToolJudgerConfig, fail_on_seven, small_resources, tool_states
from judger.trainer.io import example_data

pytestmark = pytest.mark.ray

DATA = example_data("gsm8k_test.jsonl")


def dumps(states: list[RolloutState]) -> list[dict[str, Any]]:
    return [s.model_dump(mode="json") for s in states]


@pytest.fixture(scope="module")
def tool_pool(ray_cluster: Any) -> Any:
    pool = ToolJudgerConfig(cpu_resources=small_resources(2)).build()
    yield pool
    pool.close()


async def test_config_builds_remote_for_one_worker_and_pool_for_more(tool_pool: Any) -> None:
    assert isinstance(tool_pool, JudgerPool)
    assert len(tool_pool.replicas) == 2
    assert set(tool_pool.get_worker_status()) == {"tool_judger[0]", "tool_judger[1]"}
    single = ToolJudgerConfig(cpu_resources=small_resources(1)).build()
    try:
        assert isinstance(single, RemoteJudger) and not isinstance(single, JudgerPool)
        states = tool_states(40)
        local = await ToolJudgerConfig().build_local().batch_judge(tool_states(40))
        assert dumps(await single.batch_judge(states)) == dumps(local)
    finally:
        await single.aclose()


async def test_custom_judger_pool_equals_local_batch_and_single(tool_pool: Any) -> None:
    local = ToolJudgerConfig().build()
    expected = await local.batch_judge(tool_states(120))
    got = await tool_pool.batch_judge(tool_states(120))
    assert dumps(got) == dumps(expected)
    # the custom postprocess ran on the driver, and the failing samples failed the same way
    assert {s.extra_fields.get("postprocessed_in") for s in got if s.reward} == {os.getpid()}
    failed = [s for s in got if s.status == Status.FAILED]
    assert failed and all(s.error_msg == "ValueError: cannot parse answer 'boom'" for s in failed)
    for state_local, state_remote in zip(tool_states(20), tool_states(20)):
        a = await local.judge(state_local)
        b = await tool_pool.judge(state_remote)
        assert b.model_dump(mode="json") == a.model_dump(mode="json")


async def test_only_the_payload_crosses_to_the_actor(ray_cluster: Any) -> None:
    cfg = JudgerConfig(
        judger_name="payload_probe",
        reward_handler="judger.testing.handlers:exact_match",
        cpu_resources=small_resources(1),
    )
    judger = cfg.build()
    try:
        state = RolloutState(
            message=[{"role": "user", "content": "2+2?"}],
            response="4",
            reward_model={"ground_truth": "4"},
            response_ids=list(range(32_000)),
            logprobs=[-0.5] * 32_000,
            prompt_ids=list(range(512)),
        )
        await judger.judge(state)
        await judger.batch_judge([state.model_copy(deep=True) for _ in range(5)])
        stats = await judger.actor_stats()
        assert stats["payloads"] == 6
        assert stats["keys_seen"] == ["label", "response"]
        assert stats["pid"] != os.getpid()
        assert state.reward == {"score": 1.0, "acc": True, "pred": "4"}
    finally:
        await judger.aclose()


async def test_plain_handler_errors_match_local_in_judge_and_batch_judge(ray_cluster: Any) -> None:
    cfg = JudgerConfig(judger_name="sevens", reward_handler=fail_on_seven)
    remote = cfg.model_copy(update={"cpu_resources": small_resources(1)}).build()
    local = cfg.build()

    def states() -> list[RolloutState]:
        return [
            RolloutState(message=[], response=str(i), reward_model={"ground_truth": "3"}) for i in range(10)
        ]

    try:
        assert dumps(await remote.batch_judge(states())) == dumps(await local.batch_judge(states()))
        for a, b in zip(states(), states()):
            assert (await remote.judge(a)).model_dump() == (await local.judge(b)).model_dump()
        seven = states()[7]
        await remote.judge(seven)
        assert seven.status == Status.FAILED and seven.error_msg == "ValueError: seven is not allowed"
    finally:
        await remote.aclose()


async def test_on_error_raise_propagates_the_original_exception(ray_cluster: Any) -> None:
    cfg = JudgerConfig(
        judger_name="sevens_raise",
        reward_handler=fail_on_seven,
        on_error="raise",
        cpu_resources=small_resources(1),
    )
    remote = cfg.build()
    try:
        with pytest.raises(ValueError, match="seven is not allowed"):
            await remote.judge(RolloutState(message=[], response="7", reward_model={"ground_truth": "3"}))
        ok = await remote.judge(RolloutState(message=[], response="3", reward_model={"ground_truth": "3"}))
        assert ok.reward == {"score": 1.0}
    finally:
        await remote.aclose()


async def test_composed_tree_mixing_remote_pool_and_local_equals_all_local(tool_pool: Any) -> None:
    exact = JudgerConfig(judger_name="exact", reward_handler="judger.testing.handlers:exact_match")
    remote_tree = ComposedJudgerConfig(
        branches={
            "tools": tool_pool,
            "exact": exact.model_copy(update={"cpu_resources": small_resources(1)}),
            "local_exact": exact.model_copy(update={"judger_name": "local_exact"}),
        },
        merge_fn=weighted_sum,
    ).build()
    local_tree = ComposedJudgerConfig(
        branches={"tools": ToolJudgerConfig(), "exact": exact, "local_exact": exact},
        merge_fn=weighted_sum,
    ).build()

    def states() -> list[RolloutState]:
        out = tool_states(30)
        for i, s in enumerate(out):
            s.data_source = ["tools", {"tools": 0.5, "exact": 0.5}, {"exact": 2.0, "local_exact": 1.0}][i % 3]
        return out

    try:
        assert dumps(await remote_tree.batch_judge(states())) == dumps(await local_tree.batch_judge(states()))
        for a, b in zip(states()[:6], states()[:6]):
            assert (await remote_tree.judge(a)).model_dump() == (await local_tree.judge(b)).model_dump()
    finally:
        # the pool is shared by this module: close only the branch the tree built itself
        await remote_tree.branches["exact"].aclose()


def gsm8k_states(n: int) -> list[RolloutState]:
    rows = [json.loads(line) for line in DATA.read_text().splitlines()[:n]]
    states = []
    for i, row in enumerate(rows):
        label = row["answer"].split("####")[-1].strip()
        response = [row["answer"], f"so the answer is\n#### {label}.0", "#### 0", "I don't know"][i % 4]
        states.append(RolloutState(message=[], response=response, reward_model={"ground_truth": label}))
    return states


async def test_gsm8k_preset_pool_equals_local(ray_cluster: Any) -> None:
    import judger.presets.gsm8k as presets

    cfg = presets.GSM8KJudgerConfig()
    local = await cfg.build().batch_judge(gsm8k_states(200))
    pool = cfg.model_copy(update={"cpu_resources": small_resources(2)}).build()
    try:
        assert isinstance(pool, JudgerPool)
        remote = await pool.batch_judge(gsm8k_states(200))
        assert dumps(remote) == dumps(local)
        scores = [s.reward["score"] for s in remote]
        assert 0.0 in scores and 1.0 in scores  # the comparison covered right and wrong answers
    finally:
        await pool.aclose()
