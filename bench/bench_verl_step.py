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

import torch

from judger.trainer.io import example_data

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "clients"))
from conftest import byte_tokenizer  # noqa: E402


def step_data(tokenizer: Any, n: int) -> Any:
    """``n`` rows of the bundled MATH responses (in order, repeated), padded to the longest."""
    from test_verl_client import make_data

    lines = example_data("math_rollouts_dev.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    samples = [
        (row["data_source"], row["response"], row["reward_model"]["ground_truth"])
        for row in (rows[i % len(rows)] for i in range(n))
    ]
    width = max(len(tokenizer.encode(text)) for _, text, _ in samples)
    return make_data(tokenizer, samples, width=width)


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
