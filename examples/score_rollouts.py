"""Score a rollouts file from Python and log verl-style validation metrics.

    python examples/score_rollouts.py [ROLLOUTS.jsonl|parquet] [-o scored.parquet]

Without an argument it scores the bundled MATH responses (judger/data/math_rollouts_dev.jsonl) with
the MATH preset; `judger score` does the same from the command line, with a table.
"""

from __future__ import annotations

import argparse
import asyncio

from judger.presets import MathJudgerConfig
from judger.trainer.io import example_data, read_rollouts, write_rollouts
from judger.trainer.metrics import compute_validation_metrics, flatten_metrics


async def score(path: str) -> list:
    rollouts = read_rollouts(path)
    for error in rollouts.errors:
        print(f"skipped {error}")
    async with MathJudgerConfig().build() as judger:
        return await judger.batch_judge(rollouts.states)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("input", nargs="?", default=str(example_data()))
    parser.add_argument("-o", "--output")
    args = parser.parse_args()

    states = asyncio.run(score(args.input))
    failed = sum(1 for s in states if s.reward is None)
    print(f"{len(states)} samples, {failed} failed to be judged")
    for name, value in flatten_metrics(compute_validation_metrics(states)).items():
        if name.startswith("val-core/"):
            print(f"{name:70s} {value:.4f}")
    if args.output:
        write_rollouts(args.output, states)
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
