"""`judger eval` and the data path against a real vLLM server, next to a plain OpenAI-style client.

Needs a running server (for example the serving tier's tiny model, in ``.venv-serving``)::

    VLLM_CPU_KVCACHE_SPACE=1 .venv-serving/bin/python -m vllm.entrypoints.openai.api_server \\
        --model .serving-cache/tiny-llama --dtype float32 --max-model-len 2048 --enforce-eager \\
        --no-enable-chunked-prefill --host 127.0.0.1 --port 18431 &
    PYTHONPATH=src .venv-serving/bin/python bench/bench_eval_vllm.py --base-url http://127.0.0.1:18431 \\
        --model .serving-cache/tiny-llama --prompts 16 -n 4 --max-tokens 32 --rounds 2

Each round runs, in an order that alternates between rounds (the machine is shared and noisy):

- ``judger eval``: ``judger.cli.main.main(["eval", ...])`` in this process (sampler, controller,
  GSM8K judging, report), the same prompts, ``-n``, ``--max-tokens``, ``--seed`` and concurrency;
- ``plain``: one ``httpx.AsyncClient`` posting the same chat requests (n samples each, the same
  seed and concurrency) and decoding the JSON, as a bare ``openai`` client would; nothing judged;
- ``data path``: ``AgentLoopManager.produce_batch`` over the completions endpoint with the model
  folder as ``hf_checkpoint`` (prompt ids from its chat template), judged, then
  ``prepare_train_data``.

One prompt through each side first keeps import and first-use costs out of round 0. Printed:
samples/s of each and the ratio judger eval / plain.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import time
from typing import Any

import httpx

from judger.cli.main import main as judger_main
from judger.trainer.io import example_data
from judger.trainer.sampler import SamplerConfig

GSM8K = example_data("gsm8k_test.jsonl")


def run_eval(args: argparse.Namespace) -> tuple[int, float]:
    argv = ["eval", str(GSM8K), "--base-url", args.base_url, "--model", args.model, "--preset", "gsm8k"]
    argv += ["--limit", str(args.prompts), "-n", str(args.n), "--max-tokens", str(args.max_tokens)]
    argv += ["--temperature", "1.0", "--seed", "1", "--concurrency", str(args.concurrency)]
    argv += ["--format", "json", "--no-progress"]
    out = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out):
        judger_main(argv)
    elapsed = time.perf_counter() - start
    report = json.loads(out.getvalue().strip().splitlines()[-1])
    return int(report["generation"]["generated_samples"]), elapsed


async def run_plain(args: argparse.Namespace) -> tuple[int, float]:
    prompts = SamplerConfig(data_files=GSM8K, limit=args.prompts, shuffle=False).build().prompts
    slots = asyncio.Semaphore(args.concurrency)
    samples = 0
    async with httpx.AsyncClient(timeout=600.0) as client:

        async def one(messages: list[dict[str, Any]]) -> None:
            nonlocal samples
            body = {
                "model": args.model,
                "messages": messages,
                "n": args.n,
                "max_tokens": args.max_tokens,
                "temperature": 1.0,
                "seed": 1,
            }
            async with slots:
                resp = await client.post(f"{args.base_url}/v1/chat/completions", json=body)
            samples += len(resp.json()["choices"])

        start = time.perf_counter()
        await asyncio.gather(*(one(p.message) for p in prompts))
        return samples, time.perf_counter() - start


async def run_data_path(args: argparse.Namespace) -> tuple[int, float]:
    from judger.presets import GSM8KJudgerConfig
    from judger.trainer.agent_loop import SingleTurnAgentLoopConfig
    from judger.trainer.agent_loop_manager import AgentLoopManagerConfig
    from judger.trainer.controller import RolloutControllerConfig
    from judger.trainer.task import TaskSpecConfig
    from judger.trainer.training import prepare_train_data

    task = TaskSpecConfig(
        task_name="gsm8k",
        agent_loop_config=SingleTurnAgentLoopConfig(
            hf_checkpoint=args.model,
            sample_params={"max_tokens": args.max_tokens, "temperature": 1.0, "seed": 1},
        ),
        judger_config=GSM8KJudgerConfig(),
        sampler_config=SamplerConfig(data_files=GSM8K, n=args.n, limit=args.prompts, shuffle=False),
    )
    rollout = RolloutControllerConfig(base_urls=[args.base_url], endpoint="completions")
    manager = AgentLoopManagerConfig(
        tasks=[task], rollout_config=rollout, max_concurrent_groups=args.concurrency
    ).build()
    start = time.perf_counter()
    try:
        batch = await manager.produce_batch(args.prompts)
    finally:
        await manager.aclose()
    data = prepare_train_data(batch)
    return len(data.samples), time.perf_counter() - start


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True, help="the served name (and the model folder)")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("-n", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    # imports and first-use costs (the judgers, rich, the TLS context) out of round 0
    warm = argparse.Namespace(**{**vars(args), "prompts": 1, "n": 1, "max_tokens": 1})
    run_eval(warm)
    asyncio.run(run_plain(warm))
    asyncio.run(run_data_path(warm))
    print("round | order | judger eval samples/s | plain samples/s | ratio | data path samples/s")
    for r in range(args.rounds):
        order = ["eval", "plain", "path"] if r % 2 == 0 else ["plain", "eval", "path"]
        rates: dict[str, float] = {}
        for side in order:
            if side == "eval":
                samples, seconds = run_eval(args)
            elif side == "plain":
                samples, seconds = asyncio.run(run_plain(args))
            else:
                samples, seconds = asyncio.run(run_data_path(args))
            rates[side] = samples / seconds
        ratio = rates["eval"] / rates["plain"]
        print(
            f"{r} | {' > '.join(order)} | {rates['eval']:.1f} | {rates['plain']:.1f} | {ratio:.2f} | "
            f"{rates['path']:.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
