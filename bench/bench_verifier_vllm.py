"""An LLM verifier against a real vLLM server, next to a plain async client sending the same prompts.

Needs a running server (the serving tier's tiny model, in ``.venv-serving``)::

    .venv-serving/bin/python tests/serving/build_tiny_model.py .serving-cache/tiny-llama
    VLLM_CPU_KVCACHE_SPACE=1 .venv-serving/bin/python -m vllm.entrypoints.openai.api_server \\
        --model .serving-cache/tiny-llama --dtype float32 --max-model-len 2048 --enforce-eager \\
        --no-enable-chunked-prefill --host 127.0.0.1 --port 18446 &
    PYTHONPATH=src .venv-serving/bin/python bench/bench_verifier_vllm.py --base-url http://127.0.0.1:18446 \\
        --model .serving-cache/tiny-llama --samples 400 --concurrency 32 --rounds 4

The samples are the 400 bundled MATH rollouts (50 questions, 8 responses each: groups as a GRPO
step has them). Each round runs, in an order that alternates between rounds:

- ``judger``: ``LLMJudgerConfig`` (judger's grading prompt, CompassVerifier's cut of the response,
  ``max_tokens=1``, temperature 0, ``max_concurrency`` = the concurrency) ``batch_judge`` over the
  samples; the tiny model's letter is taken as the verdict (a random model writes no real one);
- ``plain``: one ``httpx.AsyncClient`` posting exactly the messages the judger builds, with the same
  sampling parameters and at most the same number in flight, and decoding the JSON.

Every round and side grades responses of its own (a tag at the end of each response), so neither
side meets its prompts whole in vLLM's prefix cache: what it can reuse is what the prompts share,
the instructions first, then the question and gold answer of a group. Printed per side: samples/s,
the ratio judger / plain, and vLLM's prefix-cache hit rate over the side's requests (the
``vllm:prefix_cache_hits`` and ``vllm:prefix_cache_queries`` counters of ``/metrics``, in
tokens). ``--layout sample-first`` adds a plain side whose template puts the sample before the
instructions, for the hit rate a layout that shares nothing up front gets.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import time
from typing import Any

import httpx

from judger import RolloutState
from judger.trainer.io import example_data
from judger.verifiers import LLMJudgerConfig
from judger.verifiers.prompts import GRADER_PROMPT

MATH = example_data("math_rollouts_dev.jsonl")
SAMPLE_FIRST = "{response}\n\n{question}\n\n{gold_answer}\n\n" + GRADER_PROMPT.split("{question}")[0]


def any_letter(reply: str) -> str:
    """The tiny random model writes no verdict: every reply counts as one."""
    return "A"


def states(samples: int, tag: str) -> list[RolloutState]:
    rows = [json.loads(line) for line in MATH.read_text().splitlines() if line]
    out = []
    for i in range(samples):
        row = rows[i % len(rows)]
        out.append(
            RolloutState(
                message=row["prompt"],
                response=f"{row['response']}\n[{tag}-{i}]",
                reward_model=row["reward_model"],
            )
        )
    return out


def config(args: argparse.Namespace, template: str = GRADER_PROMPT) -> LLMJudgerConfig:
    return LLMJudgerConfig(
        hosts=[args.base_url],
        model=args.model,
        prompt_template=template,
        verdict_parser=any_letter,
        max_tokens=1,
        max_concurrency=args.concurrency,
        max_response_lines=10,
        max_response_chars=1000,
        request_timeout=120.0,
        timeout=600.0,
    )


def cache_counters(url: str) -> tuple[float, float]:
    text = httpx.get(url + "/metrics", timeout=10).text

    def total(name: str) -> float:
        return sum(float(v) for v in re.findall(rf"^vllm:{name}_total{{[^}}]*}} ([0-9.e+]+)$", text, re.M))

    return total("prefix_cache_hits"), total("prefix_cache_queries")


async def run_judger(args: argparse.Namespace, tag: str) -> int:
    judger = config(args).build()
    try:
        done = await judger.batch_judge(states(args.samples, tag))
    finally:
        await judger.aclose()
    failed = [s.error_msg for s in done if s.reward is None]
    assert not failed, failed[:3]
    return len(done)


async def run_plain(args: argparse.Namespace, tag: str, template: str = GRADER_PROMPT) -> int:
    builder = config(args, template).build_local()
    payloads = [builder.preprocess(s) for s in states(args.samples, tag)]
    bodies = [
        {"model": args.model, "messages": builder.build_messages(p), "temperature": 0.0, "max_tokens": 1}
        for p in payloads
    ]
    slots = asyncio.Semaphore(args.concurrency)
    limits = httpx.Limits(max_connections=args.concurrency)
    async with httpx.AsyncClient(base_url=args.base_url, timeout=120.0, limits=limits) as client:

        async def one(body: dict[str, Any]) -> str:
            async with slots:
                resp = await client.post("/v1/chat/completions", json=body)
                resp.raise_for_status()
                return str(resp.json()["choices"][0]["message"]["content"])

        replies = await asyncio.gather(*(one(b) for b in bodies))
    await builder.aclose()
    return len(replies)


def timed(args: argparse.Namespace, side: str, tag: str) -> tuple[float, float]:
    """(samples/s, prefix-cache hit rate) of one side's run."""
    hits0, queries0 = cache_counters(args.base_url)
    start = time.perf_counter()
    if side == "judger":
        n = asyncio.run(run_judger(args, tag))
    elif side == "plain":
        n = asyncio.run(run_plain(args, tag))
    else:
        n = asyncio.run(run_plain(args, tag, SAMPLE_FIRST))
    elapsed = time.perf_counter() - start
    hits1, queries1 = cache_counters(args.base_url)
    rate = (hits1 - hits0) / (queries1 - queries0) if queries1 > queries0 else float("nan")
    return n / elapsed, rate


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--samples", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--layout", choices=("fixed-first", "sample-first"), default="fixed-first")
    args = parser.parse_args()
    sides = ["judger", "plain"] + (["sample-first"] if args.layout == "sample-first" else [])
    for side in sides:  # warm: imports, the model lookup, the server's first batches
        timed(argparse.Namespace(**{**vars(args), "samples": 8}), side, f"warm-{side}")
    rates: dict[str, list[float]] = {s: [] for s in sides}
    hits: dict[str, list[float]] = {s: [] for s in sides}
    ratios = []
    for r in range(args.rounds):
        order = sides if r % 2 == 0 else list(reversed(sides))
        got = {side: timed(args, side, f"r{r}-{side}") for side in order}
        for side, (rate, hit) in got.items():
            rates[side].append(rate)
            hits[side].append(hit)
        ratios.append(got["judger"][0] / got["plain"][0])
    print(
        f"LLM verifier vs plain client, {args.samples} MATH samples, concurrency {args.concurrency}, "
        f"{args.rounds} rounds, vLLM at {args.base_url}"
    )
    for side in sides:
        print(
            f"  {side:13s} {statistics.median(rates[side]):7.1f} samples/s   prefix-cache hit rate "
            f"{statistics.median(hits[side]):.1%} (rounds: {' '.join(f'{h:.1%}' for h in hits[side])})"
        )
    print(
        f"  judger / plain: {statistics.median(ratios):.2f}x (rounds: {' '.join(f'{x:.2f}' for x in ratios)})"
    )


if __name__ == "__main__":
    main()
