"""Throughput of the rollout path with generation served instantly: is judger ever the bottleneck?

Side by side, on the same fake OpenAI-compatible servers (judger.testing.fake_openai, each in its
own uvicorn process on 127.0.0.1, answering at once) and the same requests (GSM8K prompts from the
bundled test set, ``n`` samples per request, token ids and logprobs asked for):

- ``judger``: Sampler groups -> SingleTurnAgentLoop -> RolloutController (balancing, retries,
  parsing into RolloutStates) -> GSM8K judger, ``--groups`` groups in flight;
- ``httpx``: a bare ``httpx.AsyncClient`` loop posting the same bodies with the same concurrency and
  decoding the JSON, nothing else.

Rounds alternate which path goes first (the machine is shared and noisy); the ratio is what to read.
Also reported: the client process's CPU milliseconds per 1,000 samples (what judger costs on top of
the bare loop) and the rate one client core could sustain at that cost.

    python bench/bench_rollout_path.py --prompts 512 -n 8 --groups 64 --servers 2 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from judger.presets import GSM8KJudgerConfig
from judger.testing.servers import free_port
from judger.trainer.agent_loop import SingleTurnAgentLoop, SingleTurnAgentLoopConfig
from judger.trainer.controller import RolloutControllerConfig
from judger.trainer.io import example_data
from judger.trainer.sampler import SamplerConfig

MODEL = "bench-policy"


def start_servers(count: int) -> tuple[list[subprocess.Popen[bytes]], list[str]]:
    procs, urls = [], []
    env = {**os.environ, "FAKE_OPENAI_MODEL": MODEL}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[1] / "src"), env.get("PYTHONPATH", "")])
    for _ in range(count):
        port = free_port()
        cmd = [sys.executable, "-m", "uvicorn", "--factory", "judger.testing.fake_openai:app"]
        cmd += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning", "--no-access-log"]
        procs.append(subprocess.Popen(cmd, env=env))
        urls.append(f"http://127.0.0.1:{port}")
    deadline = time.monotonic() + 30
    for url in urls:
        while True:
            try:
                if httpx.get(url + "/v1/models", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"fake server {url} did not start")
            time.sleep(0.1)
    return procs, urls


async def judger_path(
    urls: list[str], sampler_cfg: SamplerConfig, groups_in_flight: int
) -> tuple[int, float]:
    sampler = sampler_cfg.build()
    controller = RolloutControllerConfig(
        base_urls=urls, model=MODEL, max_concurrency=groups_in_flight
    ).build()
    loop = SingleTurnAgentLoop(SingleTurnAgentLoopConfig(), controller, GSM8KJudgerConfig().build())
    groups = list(sampler.groups())
    slots = asyncio.Semaphore(groups_in_flight)
    judged = 0

    async def one(group: list[Any]) -> None:
        nonlocal judged
        async with slots:
            states = await loop.generate_group(group)
        judged += sum(1 for s in states if s.reward is not None)

    start = time.perf_counter()
    await asyncio.gather(*(one(g) for g in groups))
    elapsed = time.perf_counter() - start
    await controller.aclose()
    if judged != len(groups) * sampler_cfg.n:
        raise RuntimeError(f"only {judged} of {len(groups) * sampler_cfg.n} samples judged")
    return judged, elapsed


async def bare_httpx(urls: list[str], sampler_cfg: SamplerConfig, groups_in_flight: int) -> tuple[int, float]:
    sampler = sampler_cfg.build()
    # the very bodies the controller sends
    controller = RolloutControllerConfig(base_urls=urls, model=MODEL).build()
    bodies = [
        controller._body(g[0], SingleTurnAgentLoopConfig().sample_params, len(g), MODEL)
        for g in sampler.groups()
    ]
    # one client per server, as the controller has (one shared pool is about 2x slower: see
    # docs/benchmarks.md); requests go round robin, the semaphore bounds them in flight
    limits = httpx.Limits(max_connections=groups_in_flight, max_keepalive_connections=groups_in_flight)
    clients = [httpx.AsyncClient(timeout=60, limits=limits) for _ in urls]
    slots = asyncio.Semaphore(groups_in_flight)
    samples = 0

    async def one(i: int, body: dict[str, Any]) -> None:
        nonlocal samples
        async with slots:
            k = i % len(urls)
            resp = await clients[k].post(urls[k] + "/v1/chat/completions", json=body)
            samples += len(resp.json()["choices"])

    start = time.perf_counter()
    await asyncio.gather(*(one(i, b) for i, b in enumerate(bodies)))
    elapsed = time.perf_counter() - start
    for client in clients:
        await client.aclose()
    return samples, elapsed


def measure(fn: Any, *args: Any) -> dict[str, float]:
    cpu0 = time.process_time()
    samples, elapsed = asyncio.run(fn(*args))
    cpu = time.process_time() - cpu0
    return {
        "samples": samples,
        "seconds": elapsed,
        "per_s": samples / elapsed,
        "cpu_ms_per_1k": 1e6 * cpu / samples,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prompts", type=int, default=512)
    parser.add_argument("-n", type=int, default=8)
    parser.add_argument("--groups", type=int, default=64, help="groups (requests) in flight")
    parser.add_argument("--servers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    sampler_cfg = SamplerConfig(
        data_files=example_data("gsm8k_test.jsonl"), n=args.n, limit=args.prompts, shuffle=False
    )
    paths = {"judger": judger_path, "httpx": bare_httpx}
    procs, urls = start_servers(args.servers)
    try:
        measure(judger_path, urls, sampler_cfg, args.groups)  # warm-up: imports, connections
        measure(bare_httpx, urls, sampler_cfg, args.groups)
        rounds = []
        for r in range(args.rounds):
            # alternate which path goes first, so neither always runs on a warmer machine
            order = ("judger", "httpx") if r % 2 == 0 else ("httpx", "judger")
            result = {name: measure(paths[name], urls, sampler_cfg, args.groups) for name in order}
            rounds.append(result)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(10)
    best = {k: max(r[k]["per_s"] for r in rounds) for k in ("judger", "httpx")}
    ratios = [r["judger"]["per_s"] / r["httpx"]["per_s"] for r in rounds]
    if args.json:
        print(json.dumps({"rounds": rounds, "best": best, "ratios": ratios}))
        return
    print(
        f"{args.prompts} prompts x n={args.n} = {args.prompts * args.n} samples per round; "
        f"{args.groups} requests in flight; {args.servers} fake server process(es)"
    )
    print(
        f"{'round':>5} {'judger samples/s':>17} {'httpx samples/s':>16} {'ratio':>6} "
        f"{'judger cpu ms/1k':>17} {'httpx cpu ms/1k':>16}"
    )
    for i, r in enumerate(rounds):
        print(
            f"{i:>5} {r['judger']['per_s']:>17.0f} {r['httpx']['per_s']:>16.0f} {ratios[i]:>6.2f} "
            f"{r['judger']['cpu_ms_per_1k']:>17.0f} {r['httpx']['cpu_ms_per_1k']:>16.0f}"
        )
    print(f"best: judger {best['judger']:.0f} samples/s, bare httpx {best['httpx']:.0f} samples/s")
    # what one client core could sustain if the servers were infinitely fast and the core ours alone
    ceiling = {k: 1e6 / min(r[k]["cpu_ms_per_1k"] for r in rounds) for k in ("judger", "httpx")}
    print(
        f"client CPU ceiling (1 core, best round): judger {ceiling['judger']:.0f} samples/s, "
        f"bare httpx {ceiling['httpx']:.0f} samples/s"
    )


if __name__ == "__main__":
    main()
