"""judger rewards called by TRL's own GRPOTrainer code (``_calculate_rewards``), on chosen completions:
what TRL hands a reward function reaches the judger."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from judger.compat.trl import judger_reward
from judger.presets import DapoMathJudgerConfig

pytestmark = pytest.mark.slow  # each test builds a GRPOTrainer over a tiny model


def trainer_for(
    tmp_path: Path, tokenizer: Any, model: Any, rewards: list[Any], rows: list[dict[str, Any]]
) -> Any:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=8,
        report_to=[],
        use_cpu=True,
        bf16=False,
    )
    return GRPOTrainer(
        model=model,
        reward_funcs=rewards,
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
    )


def trl_rewards(
    trainer: Any, rows: list[dict[str, Any]], completions: list[str], tokenizer: Any
) -> list[list[float]]:
    """TRL's own reward step on these completions: one row of rewards per completion."""
    prompts = [row["prompt"] for row in rows]
    ids = [tokenizer.encode(c) for c in completions]
    rewards = trainer._calculate_rewards(rows, prompts, completions, ids)
    return rewards.tolist()


GSM8K_ROW = {
    "question": "Natalia sold clips to 48 of her friends in April, and then she sold half as many in May?",
    "answer": "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
    "Natalia sold 48+24 = <<48+24=72>>72 clips.\n#### 72",
}


def test_gsm8k_answer_column_read_as_final_answer(tmp_path: Path, tokenizer: Any, make_lm: Any) -> None:
    """openai/gsm8k's ``answer`` column, as the README suggests (label_key="answer")."""
    rows = [{"prompt": GSM8K_ROW["question"], "answer": GSM8K_ROW["answer"]}] * 2
    reward = judger_reward("gsm8k", failure_reward=-1.0, label_key="answer")
    trainer = trainer_for(tmp_path, tokenizer, make_lm(tokenizer), [reward], rows)
    got = trl_rewards(trainer, rows, ["24 + 48 = 72\n#### 72", "#### 71"], tokenizer)
    assert got == [[1.0], [0.0]]
    assert trainer._pending_metrics[f"{reward.name}/failures"] == [0.0]


def test_completion_ids_reach_dapo_overlong(tmp_path: Path, tokenizer: Any, make_lm: Any) -> None:
    config = DapoMathJudgerConfig(
        enable_overlong_buffer=True, max_response_len=20, overlong_buffer_len=10, overlong_penalty_factor=1.0
    )
    rows = [{"prompt": "6 * 7?", "solution": "42"}] * 2
    reward = judger_reward(config, failure_reward=-5.0)
    trainer = trainer_for(tmp_path, tokenizer, make_lm(tokenizer), [reward], rows)
    short, long = "Answer: 42", "x" * 5 + "\nAnswer: 42"  # 10 and 16 byte tokens
    got = trl_rewards(trainer, rows, [short, long], tokenizer)
    # 16 tokens: 6 into the 10-token buffer before 20, penalty -0.6; neither sample failed
    assert got[0] == [1.0] and got[1][0] == pytest.approx(0.4)
    assert trainer._pending_metrics[f"{reward.name}/failures"] == [0.0]


def test_two_judger_rewards_have_own_names(tmp_path: Path, tokenizer: Any, make_lm: Any) -> None:
    rows = [{"prompt": "6 * 7?", "solution": "42"}] * 2
    strict = judger_reward("gsm8k", failure_reward=0.0)
    flexible = judger_reward("GSM8KJudgerConfig", failure_reward=0.0)
    trainer = trainer_for(tmp_path, tokenizer, make_lm(tokenizer), [strict, flexible], rows)
    assert len(set(trainer.reward_func_names)) == 2, trainer.reward_func_names
    assert all(name.startswith("judger_gsm8k") for name in trainer.reward_func_names)
    trl_rewards(trainer, rows, ["#### 42", "#### 41"], tokenizer)
    for name in trainer.reward_func_names:
        assert trainer._pending_metrics[f"{name}/acc"] == [0.5]
