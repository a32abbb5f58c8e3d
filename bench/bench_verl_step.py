"""One GRPO-shaped reward step through verl 0.9.1's own legacy managers, judger against verl.

64 prompts x 16 responses = 1,024 rows as a verl ``DataProto`` (a tokenizer built here: one token a
byte by default, or ``--tokenizer bpe``, trained on the bundled rows; responses padded to the
longest), one step per batch:

- MATH: the bundled real MATH responses (repeated in order, so a row recurs two or three times:
  the managers decode each distinct row once; ``--distinct-math`` gives every row a first line of
  its own, so nothing is shared);
- GSM8K: the bundled GSM8K test solutions as responses, each with its own first line (so no two
  rows are equal) and a final answer that is right, reformatted, wrong or missing.

Runs in the client tier's environment (``make test-clients`` builds it)::

    .venv-clients/bin/python bench/bench_verl_step.py [--rounds 5] [--batch math|gsm8k|both] [--tokenizer bpe]

Rows, each timed per step with sides alternated round by round (warm: one untimed step first):

- verl: ``verl.workers.reward_manager.NaiveRewardManager`` with verl's ``default_compute_score``;
- verl's naive manager calling judger's ``default_compute_score`` (default mode: the verl guide's first
  recipe);
- judger's ``NaiveRewardManager`` and ``BatchRewardManager`` with ``compat="verl"``, and
  ``NaiveRewardManager`` in the default mode.

Prints the median seconds per step (wall clock, and CPU time of the process: all its threads, so
judger's decoding on every core counts in full; on a shared machine the CPU time is the steadier
figure), the ratios to verl's step and the mean reward of each row; the compat rows must give
verl's reward tensor exactly.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch

from judger.trainer.io import example_data

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "clients"))
sys.path.append(str(HERE.parent / "tests" / "serving"))  # after the clients conftest
from conftest import byte_tokenizer  # noqa: E402


def math_samples(n: int, distinct: bool = False) -> list[tuple[str, str, Any]]:
    """``n`` rows of the bundled MATH responses (in order, repeated); ``distinct``: each with a first
    line of its own, so that no two rows are equal (nothing for the managers' decoding to share)."""
    lines = example_data("math_rollouts_dev.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    return [
        (
            row["data_source"],
            f"Attempt {i}.\n{row['response']}" if distinct else row["response"],
            row["reward_model"]["ground_truth"],
        )
        for i, row in enumerate(rows[i % len(rows)] for i in range(n))
    ]


def gsm8k_samples(n: int, seed: int = 0) -> list[tuple[str, str, Any]]:
    """``n`` distinct GSM8K responses: a test solution, its own first line, a final answer that is
    right, reformatted, wrong or missing."""
    lines = example_data("gsm8k_test.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    rng = random.Random(seed)
    out = []
    for k in range(n):
        answer = rows[k % len(rows)]["answer"]
        truth = re.findall(r"#### (\-?[0-9\.\,]+)", answer)[-1].replace(",", "")
        body = answer.rsplit("####", 1)[0].rstrip()
        final = rng.choice(
            [f"#### {truth}", f"#### {truth}.00", f"#### {int(float(truth)) + 1}", f"The answer is {truth}."]
        )
        out.append(("openai/gsm8k", f"Attempt {k}: let me think step by step.\n{body}\n{final}", truth))
    return out


def bpe_tokenizer(vocab_size: int = 32000) -> Any:
    """A byte-level BPE tokenizer trained here on the bundled rows (the serving tier's recipe, no
    hub), as the tokenizers of the models verl trains are: a few characters a token, where
    :func:`byte_tokenizer` has one byte."""
    from build_tiny_model import train_bpe
    from transformers import PreTrainedTokenizerFast

    bpe = train_bpe(vocab_size, ["<pad>", "<eos>"])
    return PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<eos>", pad_token="<pad>")


def step_data(tokenizer: Any, samples: list[tuple[str, str, Any]]) -> Any:
    """The samples as verl's ``DataProto``, responses padded to the longest."""
    from test_verl_client import make_data

    width = max(len(tokenizer.encode(text)) for _, text, _ in samples)
    return make_data(tokenizer, samples, width=width)


def paths(tokenizer: Any, data: Any) -> dict[str, Callable[[], Any]]:
    """The rows of the table: each one full reward step over ``data``, its manager built in it."""
    from verl.utils.reward_score import default_compute_score as verl_score
    from verl.workers import reward_manager as verl_rm

    from judger.compat.verl import default_compute_score as judger_score
    from judger.compat.verl import managers

    return {
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


def run_table(title: str, tokenizer: Any, data: Any, rounds: int) -> None:
    runs = paths(tokenizer, data)
    reference = None
    times: dict[str, list[float]] = {name: [] for name in runs}
    means: dict[str, float] = {}
    for name, run in runs.items():  # warm: the process pool, imports, caches
        tensor = run()
        means[name] = float(tensor.sum()) / len(data)
        if reference is None:
            reference = tensor
        if "compat=verl" in name:
            assert torch.equal(tensor, reference), f"{name}: not verl's reward tensor"
    order = list(runs)
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    for round_ in range(rounds):
        for name in order if round_ % 2 == 0 else reversed(order):
            start, start_cpu = time.perf_counter(), time.process_time()
            runs[name]()
            times[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
    base, base_cpu = statistics.median(times[order[0]]), statistics.median(cpu[order[0]])
    print(f"{title}: GRPO-shaped step, {len(data)} rows, median of {rounds} rounds, sides alternated")
    print(f"{'path':68} {'s/step':>7} {'vs verl':>8} {'CPU s':>7} {'vs verl':>8} {'mean reward':>12}")
    for name in order:
        median, median_cpu = statistics.median(times[name]), statistics.median(cpu[name])
        print(
            f"{name:68} {median:7.3f} {median / base:7.2f}x {median_cpu:7.3f} {median_cpu / base_cpu:7.2f}x "
            f"{means[name]:12.4f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--responses", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", choices=("math", "gsm8k", "both"), default="both")
    parser.add_argument(
        "--tokenizer",
        choices=("byte", "bpe"),
        default="byte",
        help="byte: one token a byte (decoding at its largest); bpe: trained here on the bundled rows",
    )
    parser.add_argument(
        "--distinct-math",
        action="store_true",
        help="MATH rows each with a first line of its own (the default repeats the 400 bundled ones)",
    )
    args = parser.parse_args()

    tokenizer = byte_tokenizer() if args.tokenizer == "byte" else bpe_tokenizer()
    n = args.prompts * args.responses
    batches = {"MATH": partial(math_samples, distinct=args.distinct_math), "GSM8K": gsm8k_samples}
    for title, samples in batches.items():
        if args.batch in (title.lower(), "both"):
            run_table(title, tokenizer, step_data(tokenizer, samples(n)), args.rounds)


if __name__ == "__main__":
    main()
