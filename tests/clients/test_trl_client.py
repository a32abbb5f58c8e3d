"""judger inside TRL's own GRPOTrainer: 2 GRPO steps on CPU with a tiny random model and a local tokenizer."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from judger.compat.trl import judger_reward


def run_grpo(tmp_path: Path, tokenizer: Any, dataset: Any, reward: Any, model: Any) -> list[dict[str, Any]]:
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=8,  # every prompt of the dataset in every step
        num_generations=2,
        max_completion_length=8,
        max_steps=2,
        logging_steps=1,
        learning_rate=1e-4,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        bf16=False,
        seed=0,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    trainer.train()
    return trainer.state.log_history


@pytest.mark.slow
def test_grpo_trains_two_steps_and_logs_judger_acc(tmp_path: Path, tokenizer: Any, make_lm: Any) -> None:
    from datasets import Dataset

    dataset = Dataset.from_list(
        [
            {"prompt": "2 + 5 = ?", "reward_model": {"ground_truth": "7"}},
            {"prompt": "3 + 3 = ?", "reward_model": {"ground_truth": "6"}},
            {"prompt": "1 + 1 = ?", "reward_model": {"ground_truth": None}},  # a broken row: failure_reward
            {"prompt": "4 + 4 = ?", "reward_model": {"ground_truth": "8"}},
        ]
    )
    reward = judger_reward("gsm8k", failure_reward=-1.0, name="judger")
    logs = run_grpo(tmp_path, tokenizer, dataset, reward, make_lm(tokenizer))
    steps = [entry for entry in logs if "judger/acc" in entry]
    assert len(steps) == 2
    assert all(0.0 <= entry["judger/acc"] <= 1.0 for entry in steps)
    assert all("rewards/judger/mean" in entry for entry in steps)
    # the unlabeled prompt's completions failed: their reward is -1, never NaN
    assert any(entry["judger/failures"] > 0 for entry in steps)
    assert all(entry["rewards/judger/mean"] == entry["rewards/judger/mean"] for entry in steps)  # not NaN


@pytest.mark.slow
def test_grpo_with_chat_prompts_and_a_sync_reward(tmp_path: Path, tokenizer: Any, make_lm: Any) -> None:
    from datasets import Dataset

    dataset = Dataset.from_list(
        [{"prompt": [{"role": "user", "content": f"{i} + 1 = ?"}], "solution": str(i + 1)} for i in range(4)]
    )
    reward = judger_reward("gsm8k", failure_reward=0.0, asynchronous=False, name="gsm8k")
    logs = run_grpo(tmp_path, tokenizer, dataset, reward, make_lm(tokenizer))
    steps = [entry for entry in logs if "gsm8k/acc" in entry]
    assert len(steps) == 2 and all(entry["gsm8k/failures"] == 0 for entry in steps)


@pytest.mark.slow
def test_the_readme_trl_snippet_runs_as_written(
    tmp_path: Path, tokenizer: Any, make_lm: Any, readme_snippet: Any
) -> None:
    """The TRL guide's script, its placeholders set to a local model folder, GSM8K-shaped rows
    and short CPU training arguments: two GRPO steps with judger's reward."""
    model_dir = tmp_path / "policy"
    make_lm(tokenizer).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    rows = [{"question": f"{i} + 1 = ?", "answer": f"{i} plus one. #### {i + 1}"} for i in range(4)]
    args = (
        f"GRPOConfig(output_dir={str(tmp_path / 'out')!r}, max_steps=2, per_device_train_batch_size=4, "
        "num_generations=2, max_completion_length=8, logging_steps=1, report_to=[], save_strategy='no', "
        "use_cpu=True, bf16=False, seed=0)"
    )
    script = tmp_path / "trl_script.py"
    script.write_text(
        readme_snippet(
            "trl",
            MODEL=repr(str(model_dir)),
            DATASET=f"__import__('datasets').Dataset.from_list({rows!r})",
            ARGS=args,
        )
        + "print([e['judger_gsm8k/acc'] for e in trainer.state.log_history if 'judger_gsm8k/acc' in e])\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    accs = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    assert len(accs) == 2 and all(0.0 <= a <= 1.0 for a in accs)
