"""One GRPO-shaped reward step through verl 0.9.1's own legacy managers, judger against verl.

64 prompts x 16 responses = 1,024 rows made of the bundled real MATH responses (repeated in order),
as a verl ``DataProto`` (a byte-level tokenizer built here, responses padded to the longest). Runs
in the client tier's environment (``make test-clients`` builds it)::

    .venv-clients/bin/python bench/bench_verl_step.py [--rounds 5]

Rows, each timed per step with sides alternated round by round (warm: one untimed step first):

- verl: ``verl.workers.reward_manager.NaiveRewardManager`` with verl's ``default_compute_score``;
- verl's naive manager calling judger's ``default_compute_score`` (default mode: the README's first
  verl recipe);
- judger's ``NaiveRewardManager`` and ``BatchRewardManager`` with ``compat="verl"``, and
  ``NaiveRewardManager`` in the default mode.

Prints the median seconds per step, the ratio to verl's step and the mean reward of each row; the
compat rows must give verl's reward tensor exactly.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from judger.trainer.io import example_data

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "clients"))
from conftest import byte_tokenizer  # noqa: E402


def step_data(tokenizer: Any, n: int) -> Any:
    from verl import DataProto

    lines = example_data("math_rollouts_dev.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    rows = [rows[i % len(rows)] for i in range(n)]
    prompt = tokenizer.encode("Q: solve it\n")
    encoded = [tokenizer.encode(row["response"]) for row in rows]
    width = max(len(ids) for ids in encoded)
    responses = [ids + [tokenizer.pad_token_id] * (width - len(ids)) for ids in encoded]
    masks = [[1] * len(prompt) + [1] * len(ids) + [0] * (width - len(ids)) for ids in encoded]
    prompts_t = torch.tensor([prompt] * n)
    responses_t = torch.tensor(responses)
    return DataProto.from_dict(
        tensors={
            "prompts": prompts_t,
            "responses": responses_t,
            "input_ids": torch.cat([prompts_t, responses_t], dim=1),
            "attention_mask": torch.tensor(masks),
        },
        non_tensors={
            "data_source": np.array([row["data_source"] for row in rows], dtype=object),
            "reward_model": np.array([row["reward_model"] for row in rows], dtype=object),
            "extra_info": np.array([{"index": i} for i in range(n)], dtype=object),
        },
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--responses", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    from verl.utils.reward_score import default_compute_score as verl_score
    from verl.workers import reward_manager as verl_rm

    from judger.compat.verl import default_compute_score as judger_score
    from judger.compat.verl import managers

    tokenizer = byte_tokenizer()
    data = step_data(tokenizer, args.prompts * args.responses)
    paths: dict[str, Callable[[], Any]] = {
        "verl naive manager, verl's default_compute_score": lambda: verl_rm.NaiveRewardManager(
            tokenizer, 0, verl_score
        )(data),
        "verl naive manager, judger's default_compute_score (default mode)": lambda: (
            verl_rm.NaiveRewardManager(tokenizer, 0, judger_score)(data)
        ),
        "judger NaiveRewardManager, compat=verl": lambda: managers.NaiveRewardManager(
            tokenizer, 0, compat="verl"
        )(data),
        "judger BatchRewardManager, compat=verl": lambda: managers.BatchRewardManager(
            tokenizer, 0, compat="verl"
        )(data),
        "judger NaiveRewardManager, default mode": lambda: managers.NaiveRewardManager(tokenizer, 0)(data),
    }
    reference = None
    times: dict[str, list[float]] = {name: [] for name in paths}
    means: dict[str, float] = {}
    for name, run in paths.items():  # warm: the process pool, imports, caches
        tensor = run()
        means[name] = float(tensor.sum()) / len(data)
        if reference is None:
            reference = tensor
        if "compat=verl" in name:
            assert torch.equal(tensor, reference), f"{name}: not verl's reward tensor"
    order = list(paths)
    for round_ in range(args.rounds):
        for name in order if round_ % 2 == 0 else reversed(order):
            start = time.perf_counter()
            paths[name]()
            times[name].append(time.perf_counter() - start)
    base = statistics.median(times[order[0]])
    print(f"GRPO-shaped step: {len(data)} rows, median of {args.rounds} rounds, sides alternated")
    print(f"{'path':70} {'s/step':>8} {'vs verl':>8} {'mean reward':>12}")
    for name in order:
        median = statistics.median(times[name])
        print(f"{name:70} {median:8.3f} {median / base:7.2f}x {means[name]:12.4f}")


if __name__ == "__main__":
    main()
