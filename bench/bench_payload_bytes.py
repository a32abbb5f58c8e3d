"""Bytes shipped to a JudgerActor per sample vs a pickle of the whole RolloutState.

    .venv/bin/python bench/bench_payload_bytes.py [--tokens 32768] [--chunk 64]

Prints a markdown section. The rollout has ``--tokens`` response tokens with their ids, logprobs and
response mask, a 512-token prompt, and a response text of about 4 characters per token ending in a
GSM8K-style ``#### 42``. "Shipped" is exactly the argument of one remote call (a list of ``--chunk``
distinct payloads, as the pool sends them), serialised by Ray's own serialiser and by pickle
(protocol 5), divided by the chunk length.
"""

from __future__ import annotations

import argparse
import copy
import json
import pickle
import random
from pathlib import Path
from typing import Any

from judger import Judger, JudgerConfig, RolloutState
from judger.core.judger import JudgerOutputBatch, JudgerPayload, JudgerPayloadBatch

DATA = Path("/work/shared/data/gsm8k_test.jsonl")


class TailJudger(Judger):
    """Ships only what a GSM8K-style scorer reads: the last 300 characters and the label."""

    def preprocess(self, rollout_state: RolloutState) -> JudgerPayload:
        return {"response": (rollout_state.response or "")[-300:], "label": rollout_state.ground_truth}

    async def judge_payload(self, payload: JudgerPayloadBatch) -> JudgerOutputBatch:
        raise NotImplementedError  # only preprocess is measured here


def response_text(tokens: int) -> str:
    if DATA.exists():
        lines = [json.loads(line)["answer"] for line in DATA.read_text().splitlines()]
    else:
        lines = ["Natalia sold 48/2 = 24 clips in May. 48+24 = 72 clips altogether."]
    parts: list[str] = []
    size = 0
    rng = random.Random(0)
    while size < 4 * tokens:
        part = rng.choice(lines).replace("####", "so")
        parts.append(part)
        size += len(part) + 1
    return "\n".join(parts)[: 4 * tokens - 10] + "\n#### 42"


def rollout(tokens: int, seed: int) -> RolloutState:
    rng = random.Random(seed)
    return RolloutState(
        message=[
            {"role": "user", "content": "Natalia sold clips to 48 of her friends in April... How many?"}
        ],
        prompt_ids=[rng.randrange(151_000) for _ in range(512)],
        response=response_text(tokens),
        response_ids=[rng.randrange(151_000) for _ in range(tokens)],
        logprobs=[-rng.random() * 5 for _ in range(tokens)],
        response_mask=[1] * tokens,
        reward_model={"ground_truth": "42"},
        data_source="openai/gsm8k",
        finish_reason="stop",
        status="completed",
    )


def sizes(obj: Any, ctx: Any) -> tuple[int, int]:
    ray_bytes = ctx.serialize(obj).total_bytes if ctx is not None else -1
    return ray_bytes, len(pickle.dumps(obj, protocol=5))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=32_768)
    ap.add_argument("--chunk", type=int, default=64)
    args = ap.parse_args()

    import ray

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    ctx = ray._private.worker.global_worker.get_serialization_context()

    base = rollout(args.tokens, 0)
    states = []
    for i in range(args.chunk):  # distinct objects, so pickle's memo cannot share them
        state = copy.deepcopy(base)
        state.rollout_id = i
        state.response = f"{i} {base.response}"  # a new string object: pickle's memo cannot share it
        states.append(state)
    state_ray, state_pickle = sizes(base, ctx)

    judgers: list[tuple[str, Judger]] = [
        (
            "NativeJudger default payload (response + label)",
            JudgerConfig(
                judger_name="native", reward_handler="judger.testing.handlers:exact_match"
            ).build_local(),
        ),
        ("tail payload (last 300 chars + label)", TailJudger("tail")),
    ]
    try:
        from judger.presets.gsm8k import GSM8KJudgerConfig

        judgers.insert(1, ("GSM8KJudgerConfig preset payload", GSM8KJudgerConfig().build_local()))
    except ImportError:
        pass

    print(f"### Bytes shipped to the actor per sample ({args.tokens} response tokens with logprobs)\n")
    print(
        f"Whole RolloutState: {state_pickle:,} bytes pickled ({state_ray:,} through Ray's serialiser); "
        f"response text {len(base.response or ''):,} characters.\n"
    )
    print("| judger payload | keys | bytes / sample (Ray) | bytes / sample (pickle) | % of the state |")
    print("|---|---|---:|---:|---:|")
    extra: list[str] = []
    for name, judger in judgers:
        payloads = [judger.preprocess(s) for s in states]
        ray_bytes, pickle_bytes = sizes(payloads, ctx)
        per_ray, per_pickle = ray_bytes / args.chunk, pickle_bytes / args.chunk
        keys = ", ".join(sorted(payloads[0]))
        print(f"| {name} | {keys} | {per_ray:,.0f} | {per_pickle:,.0f} | {100 * per_ray / state_ray:.3f}% |")
        text = sum(len(p.get("response") or "") for p in payloads) / args.chunk
        extra.append(f"{name}: {per_pickle - text:,.0f} bytes besides the response text it carries")
    print("\nWhat crosses besides the response text: " + "; ".join(extra) + ".")
    ray.shutdown()


if __name__ == "__main__":
    main()
