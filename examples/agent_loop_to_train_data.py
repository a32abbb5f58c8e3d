"""Generate groups, judge them, and build GRPO training data, with a fake policy or a real server.

    python examples/agent_loop_to_train_data.py [--endpoint http://127.0.0.1:8000 [--model NAME]]

The fake policy answers with random small numbers; swap ``fake_generate`` for your inference
engine's async call, or pass ``--endpoint`` to use an OpenAI-compatible server through its chat
endpoint (the server applies the model's chat template). Training needs the token ids the server
sampled: vLLM >= 0.10.2 returns them; with a server that does not (llama.cpp's, a strict OpenAI
one), the first group says so and the script stops there, before generating the rest.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
from typing import Any

from judger import JudgerConfig, RolloutState
from judger.trainer import (
    RolloutControllerConfig,
    SingleTurnAgentLoop,
    SingleTurnAgentLoopConfig,
    prepare_train_data,
)
from judger.trainer.token_ids import missing_training_ids

rng = random.Random(0)


async def fake_generate(state: RolloutState) -> dict[str, Any]:
    """Stands in for an inference engine: a response, its token ids and logprobs."""
    await asyncio.sleep(0.01)
    text = str(rng.choice([3, 4, 4, 5]))
    ids = [ord(c) for c in text]
    return {"response": text, "response_ids": ids, "logprobs": [-0.5] * len(ids), "finish_reason": "stop"}


def prompt(i: int, fake: bool) -> RolloutState:
    question = f"What is {i} + {4 - i}? Answer with the number only."
    return RolloutState(
        message=[{"role": "user", "content": question}],
        # the fake policy's "tokenizer" (one id per character); a server returns the prompt's own
        prompt_ids=[ord(c) for c in question] if fake else None,
        reward_model={"ground_truth": "4"},
        data_source="toy",
        group_id=i,
    )


async def main(endpoint: str | None, model: str | None) -> int:
    judger = JudgerConfig(judger_name="exact", reward_handler="judger.testing.handlers:exact_match").build()
    config = SingleTurnAgentLoopConfig(group_size=4, sample_params={"max_tokens": 32, "temperature": 1.0})
    controller = RolloutControllerConfig(base_urls=[endpoint], model=model).build() if endpoint else None
    loop = SingleTurnAgentLoop(config, controller or fake_generate, judger)
    try:
        # the first group alone: a server whose replies cannot be trained on is found here
        first = await loop.generate_group(prompt(0, fake=controller is None))
        problem = missing_training_ids(first)
        if problem is not None:
            print(f"stopped after the first group: {problem}", file=sys.stderr)
            return 1
        rest = await asyncio.gather(
            *(loop.generate_group(prompt(i, controller is None)) for i in range(1, 4))
        )
    finally:
        await loop.aclose()
        if controller is not None:
            await controller.aclose()
        await judger.aclose()
    groups = [first, *rest]
    for group in groups:
        print([(s.response, s.reward["score"] if s.reward else s.error_msg) for s in group])
    data = prepare_train_data(groups, advantage_estimator="grpo")
    print(f"{len(data.samples)} training samples, skipped groups: {data.skipped or 'none'}")
    if not data.samples:
        return 1
    first_sample = data.samples[0]
    print(
        "input_ids",
        first_sample.input_ids[-6:],
        "labels",
        first_sample.labels[-6:],
        "advantage",
        round(first_sample.advantage, 3),
    )
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", help="base URL of an OpenAI-compatible server")
    parser.add_argument("--model", help="served model name (default: the first of GET /v1/models)")
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.endpoint, args.model)))
