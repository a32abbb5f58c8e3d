"""Generate groups, judge them, and build GRPO training data, with a fake policy.

    python examples/agent_loop_to_train_data.py [--endpoint http://127.0.0.1:8000]

The fake policy answers with random small numbers; swap ``fake_generate`` for your inference
engine's async call, or pass ``--endpoint`` to use an OpenAI-compatible server (vLLM, lmdeploy,
sglang) through ``/v1/completions``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
from typing import Any

from judger import (
    JudgerConfig,
    RolloutState,
)
from judger.trainer import SingleTurnAgentLoop, SingleTurnAgentLoopConfig, prepare_train_data

rng = random.Random(0)


async def fake_generate(state: RolloutState) -> dict[str, Any]:
    """Stands in for an inference engine: a response, its token ids and logprobs."""
    await asyncio.sleep(0.01)
    text = str(rng.choice([3, 4, 4, 5]))
    ids = [ord(c) for c in text]
    return {"response": text, "response_ids": ids, "logprobs": [-0.5] * len(ids), "finish_reason": "stop"}


def prompt(i: int) -> RolloutState:
    question = f"What is {i} + {4 - i}?"
    return RolloutState(
        message=[{"role": "user", "content": question}],
        prompt_ids=[ord(c) for c in question],
        reward_model={"ground_truth": "4"},
        data_source="toy",
        group_id=i,
    )


async def main(endpoint: str | None) -> None:
    judger = JudgerConfig(judger_name="exact", reward_handler="judger.testing.handlers:exact_match").build()
    config = SingleTurnAgentLoopConfig(group_size=4, sample_params={"max_tokens": 32, "temperature": 1.0})
    loop = SingleTurnAgentLoop(
        config, endpoint or fake_generate, judger, tokenize=lambda t: [ord(c) for c in t]
    )
    try:
        groups = await asyncio.gather(*(loop.generate_group(prompt(i)) for i in range(4)))
    finally:
        await loop.aclose()
        await judger.aclose()
    for group in groups:
        print([(s.response, s.reward["score"] if s.reward else None) for s in group])
    data = prepare_train_data(groups, advantage_estimator="grpo")
    print(f"{len(data.samples)} training samples, skipped groups: {data.skipped or 'none'}")
    first = data.samples[0]
    print(
        "input_ids", first.input_ids[-6:], "labels", first.labels[-6:], "advantage", round(first.advantage, 3)
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", help="base URL of an OpenAI-compatible server")
    asyncio.run(main(parser.parse_args().endpoint))
