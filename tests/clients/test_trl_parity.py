"""judger rewards called by TRL's own GRPOTrainer code (``_calculate_rewards``), on chosen completions:
what TRL hands a reward function reaches the judger; and the TRL guide's field table against the
installed TRL's source."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from judger.compat.trl import TRL_ARGUMENTS, judger_reward
from judger.presets import DapoMathJudgerConfig

Table = dict[tuple[str, ...], str]


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


@pytest.mark.slow  # builds a GRPOTrainer over a tiny model
def test_gsm8k_answer_column_read_as_final_answer(tmp_path: Path, tokenizer: Any, make_lm: Any) -> None:
    """openai/gsm8k's ``answer`` column, as the TRL guide suggests (label_key="answer")."""
    rows = [{"prompt": GSM8K_ROW["question"], "answer": GSM8K_ROW["answer"]}] * 2
    reward = judger_reward("gsm8k", failure_reward=-1.0, label_key="answer")
    trainer = trainer_for(tmp_path, tokenizer, make_lm(tokenizer), [reward], rows)
    got = trl_rewards(trainer, rows, ["24 + 48 = 72\n#### 72", "#### 71"], tokenizer)
    assert got == [[1.0], [0.0]]
    assert trainer._pending_metrics[f"{reward.name}/failures"] == [0.0]


@pytest.mark.slow  # builds a GRPOTrainer over a tiny model
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


@pytest.mark.slow  # builds a GRPOTrainer over a tiny model
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


def _spreads_reward_kwargs(node: ast.AST) -> bool:
    keywords = node.keywords if isinstance(node, ast.Call) else []
    return any(k.arg is None and getattr(k.value, "id", "") == "reward_kwargs" for k in keywords)


def trl_reward_arguments() -> tuple[set[str], bool]:
    """The keywords GRPOTrainer's reward step passes a reward function (read from TRL's source), and
    whether it also passes every dataset column."""
    from trl import GRPOTrainer

    tree = ast.parse(textwrap.dedent(inspect.getsource(GRPOTrainer._calculate_rewards)))
    names: set[str] = set()
    columns = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _spreads_reward_kwargs(node):
            names.update(k.arg for k in node.keywords if k.arg)
        stored = isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store)
        if stored and getattr(node.value, "id", "") == "reward_kwargs":  # type: ignore[attr-defined]
            names.add(node.slice.value)  # type: ignore[attr-defined]
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "reward_kwargs":
            columns = columns or isinstance(node.value, ast.DictComp)
    return names, columns


def test_readme_table_lists_every_argument_trl_passes(parity_table: Callable[[str], Table]) -> None:
    names, columns = trl_reward_arguments()
    table = {key[-1] for key in parity_table("trl")}
    assert columns and "dataset columns" in table
    assert {"prompts", "completions", "completion_ids"} <= names
    assert sorted(names - table) == [], (
        "TRL passes these; the TRL guide's table does not say what judger does"
    )
    assert sorted(table - names - {"dataset columns"}) == [], (
        "the table lists these; TRL no longer passes them"
    )
    # every argument TRL passes is told apart from the dataset columns judger reads labels from
    assert names <= set(TRL_ARGUMENTS)
