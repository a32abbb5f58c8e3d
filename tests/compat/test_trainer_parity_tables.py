"""The guides' parity tables for slime, NeMo-RL, ROLL and rLLM (not on the package registry): each
lists exactly the fields the framework's source hands a reward or reads back (the lists below, each
cited), and a field the table says judger uses does change what judger judges."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from judger.compat import nemo_rl, rllm, slime

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]
Table = dict[tuple[str, ...], str]

FIELDS = {
    # slime/utils/types.py 107-140 (the Sample fields a reward reads: rm_hub/__init__.py 34-96);
    # args.reward_key: types.py 246-247; the remote_rm body: rm_hub/__init__.py 35-39
    "slime": {
        ("Sample", "prompt"), ("Sample", "response"), ("Sample", "label"), ("Sample", "metadata"),
        ("Sample", "status"), ("args", "reward_key"),
        ("remote_rm", "prompt"), ("remote_rm", "response"), ("remote_rm", "label"),
    },
    # nemo_rl/environments/interfaces.py 44-60 (step and EnvironmentReturn); the batch keys
    # math_environment.py reads in global_post_process_and_metrics (rewards, is_end), and judger's metric
    "nemo_rl": {
        ("step", "message_log_batch"), ("step", "metadata"),
        ("return", "observations"), ("return", "next_stop_strings"), ("return", "rewards"),
        ("return", "terminateds"), ("return", "answers"),
        ("post-process", "rewards"), ("post-process", "is_end"), ("post-process", "judge_failed"),
    },
    # roll/distributed/scheduler/generate_scheduler.py 970-993 (the request) and
    # roll/pipeline/rlvr/rewards/math_rule_reward_worker.py 268-321 (what a rule worker reads, returns)
    "roll": {
        ("batch", "prompts"), ("batch", "responses"), ("batch", "response_mask"),
        ("non_tensor_batch", "ground_truth"), ("non_tensor_batch", "tag"), ("non_tensor_batch", "rollout_id"),
        ("return", "token_level_rewards"), ("return", "response_level_rewards"), ("return", "scores"),
    },
    # rllm/types.py 37-62 (Task), 317-330 (Episode); rllm/eval/types.py 24-31 (EvalOutput)
    "rllm": {
        ("task", "metadata"), ("task", "instruction"), ("episode", "artifacts"), ("episode", "trajectories"),
        ("EvalOutput", "reward"), ("EvalOutput", "is_correct"), ("EvalOutput", "signals"),
        ("EvalOutput", "metadata"),
    },
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_table_lists_exactly_the_frameworks_fields(name: str, parity_table: Callable[[str], Table]) -> None:
    assert set(parity_table(name)) == FIELDS[name]


def uses(table: Table, where: str) -> list[str]:
    return [field for (w, field), what in table.items() if w == where and what.startswith("uses")]


def test_slime_sample_fields_the_table_uses_are_read(parity_table: Callable[[str], Table]) -> None:
    base = {"prompt": "Q", "response": "R", "label": "L", "metadata": {"data_source": "d"}}
    changed = {"prompt": "Q2", "response": "R2", "label": "L2", "metadata": {"data_source": "e"}}
    for field in uses(parity_table("slime"), "Sample"):
        before = slime.sample_state(**base).model_dump()
        after = slime.sample_state(**{**base, field: changed[field]}).model_dump()
        assert before != after, field


def test_nemo_rl_step_fields_the_table_uses_are_read(parity_table: Callable[[str], Table]) -> None:
    log = [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}]
    meta = {"ground_truth": "1", "data_source": "d"}
    assert uses(parity_table("nemo_rl"), "step") == ["message_log_batch", "metadata"]
    before = nemo_rl.conversation_state(log, meta, "ground_truth").model_dump()
    other_log = [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "B"}]
    assert nemo_rl.conversation_state(other_log, meta, "ground_truth").model_dump() != before
    assert (
        nemo_rl.conversation_state(log, {**meta, "ground_truth": "2"}, "ground_truth").model_dump() != before
    )


def test_rllm_fields_the_table_uses_are_read(parity_table: Callable[[str], Table]) -> None:
    evaluator = rllm.make_evaluator("math")

    def state(task: dict[str, Any], episode: dict[str, Any]) -> dict[str, Any]:
        t = SimpleNamespace(**{"metadata": {"ground_truth": "1"}, "instruction": "Q", **task})
        e = SimpleNamespace(**{"artifacts": {}, "trajectories": [], **episode})
        return evaluator.state(t, e).model_dump()

    table = parity_table("rllm")
    assert uses(table, "task") == ["metadata", "instruction"]
    assert uses(table, "episode") == ["artifacts", "trajectories"]
    assert state({"metadata": {"ground_truth": "2"}}, {}) != state({}, {})
    assert state({"instruction": "Q2"}, {}) != state({}, {})
    assert state({}, {"artifacts": {"answer": "x"}}) != state({}, {})
    trajectory = SimpleNamespace(output="x", steps=[])
    assert state({}, {"trajectories": [trajectory]}) != state({}, {})
