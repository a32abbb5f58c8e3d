"""Per-step reward cost inside the trainers, judger side by side with each trainer's own scorer.

Runs in the client tier's environment (``make test-clients`` builds it)::

    .venv-clients/bin/python bench/bench_clients.py [--n 400]

verl: one chunk of the 400 bundled MATH rollouts through verl 0.9.1's ``RewardLoopWorker`` (what
each reward-loop actor does per training step), with verl's naive manager and verl's
``default_compute_score`` against judger's ``NaiveRewardManager`` (``compat=verl`` and default).
TRL: the same completions through TRL's ``accuracy_reward`` (Math-Verify) against
``judger_reward("math")``, called as ``GRPOTrainer`` calls them. Each is warmed once (process pool
start), then timed once; the mean reward is printed next to the time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from judger.trainer.io import example_data

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "clients"))
from conftest import byte_tokenizer  # noqa: E402

VERL_CONFIG_DIR = str(Path(__import__("verl").__file__).parent / "trainer" / "config")


def rows(n: int) -> list[dict[str, Any]]:
    lines = example_data("math_rollouts_dev.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines[:n]]


def dataproto(tokenizer: Any, data: list[dict[str, Any]]) -> Any:
    from verl import DataProto

    encoded = [tokenizer.encode(r["response"]) for r in data]
    width = max(len(e) for e in encoded)
    prompt = tokenizer.encode("Q:")
    responses = [e + [tokenizer.pad_token_id] * (width - len(e)) for e in encoded]
    masks = [[1] * len(prompt) + [1] * len(e) + [0] * (width - len(e)) for e in encoded]
    prompts = torch.tensor([prompt] * len(data))
    responses_t = torch.tensor(responses)
    return DataProto.from_dict(
        tensors={
            "prompts": prompts,
            "responses": responses_t,
            "input_ids": torch.cat([prompts, responses_t], 1),
            "attention_mask": torch.tensor(masks),
        },
        non_tensors={
            "data_source": np.array([r["data_source"] for r in data], dtype=object),
            "reward_model": np.array([r["reward_model"] for r in data], dtype=object),
            "extra_info": np.array([{} for _ in data], dtype=object),
        },
    )


def verl_step(model_dir: Path, overrides: list[str], data: list[dict[str, Any]]) -> tuple[float, float]:
    from hydra import compose, initialize_config_dir
    from verl.experimental.reward_loop import RewardLoopWorker

    with initialize_config_dir(config_dir=VERL_CONFIG_DIR, version_base=None):
        config = compose("ppo_trainer", overrides=[f"actor_rollout_ref.model.path={model_dir}", *overrides])
    asyncio.set_event_loop(asyncio.new_event_loop())
    worker = RewardLoopWorker(config)
    batch = dataproto(worker.input_tokenizer, data)
    worker.loop.run_until_complete(worker.compute_score_batch(batch[:8]))  # warm-up
    start = time.perf_counter()
    out = worker.loop.run_until_complete(worker.compute_score_batch(batch))
    elapsed = time.perf_counter() - start
    return elapsed, float(np.mean([o["reward_score"] for o in out]))


def trl_step(fn: Any, data: list[dict[str, Any]]) -> tuple[float, float]:
    completions = [[{"role": "assistant", "content": r["response"]}] for r in data]
    kwargs = {
        "prompts": [r["prompt"] for r in data],
        "completions": completions,
        "completion_ids": [[0]] * len(data),
        "solution": [r["reward_model"]["ground_truth"] for r in data],
        "trainer_state": None,
        "log_metric": lambda name, value: None,
        "log_extra": lambda name, values: None,
    }

    def call(n: int) -> list[float]:
        sub = {k: (v[:n] if isinstance(v, list) else v) for k, v in kwargs.items()}
        out = fn(**sub)
        return asyncio.run(out) if asyncio.iscoroutine(out) else out

    call(8)  # warm-up
    start = time.perf_counter()
    rewards = call(len(data))
    elapsed = time.perf_counter() - start
    return elapsed, float(np.mean([r if r is not None else 0.0 for r in rewards]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=400)
    args = parser.parse_args()
    data = rows(args.n)
    manager = [
        "reward.reward_manager.source=importlib",
        "reward.reward_manager.module.path=pkg://judger.compat.verl.managers",
        "reward.reward_manager.name=NaiveRewardManager",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        byte_tokenizer(Path(tmp))
        results = [
            ("verl", "verl naive + verl default_compute_score", verl_step(Path(tmp), [], data)),
            (
                "verl",
                "judger NaiveRewardManager compat=verl",
                verl_step(Path(tmp), [*manager, "+reward.reward_kwargs.compat=verl"], data),
            ),
            ("verl", "judger NaiveRewardManager (default)", verl_step(Path(tmp), manager, data)),
        ]
    from trl.rewards import accuracy_reward

    from judger.compat.trl import judger_reward

    results += [
        ("trl", "trl.rewards.accuracy_reward (Math-Verify)", trl_step(accuracy_reward, data)),
        ("trl", 'judger_reward("math") async', trl_step(judger_reward("math", failure_reward=0.0), data)),
    ]
    print(f"{len(data)} MATH rollouts per step")
    print(f"{'client':6} {'scorer':45} {'seconds':>8} {'ms/sample':>10} {'mean reward':>12}")
    for client, name, (seconds, mean) in results:
        print(f"{client:6} {name:45} {seconds:8.2f} {1000 * seconds / len(data):10.2f} {mean:12.3f}")


if __name__ == "__main__":
    main()
