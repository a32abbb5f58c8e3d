"""Where calls run, per path: ``batch_judge`` time per sample of the judgers over each executor.

    PYTHONPATH=src .venv/bin/python bench/bench_executors.py [--n 20000] [--repeat 5] [--json]

Paths, each over the same ``--n`` prebuilt RolloutStates (distinct responses, so no dedup):

- ``scorer-inline``: ``ScorerJudger`` with GSM8K's scorer on the event loop (the generic batch path,
  as composed and remote judging take it; the GSM8K preset's own single-pass path does not come here);
- ``scorer-process``: ``ScorerJudger`` with a trivial exact-match scorer on the shared worker processes;
- ``native-thread``: ``NativeJudger`` with a trivial sync handler on thread lanes;
- ``native-process``: the same handler, importable, in the shared worker processes;
- ``native-async``: a trivial async handler on the event loop.

Prints wall and CPU microseconds per sample (best of ``--repeat``; CPU time is this process's, all
its threads, not the workers': the steadier figure on a shared machine). Compare two trees side by
side by running the same file with ``PYTHONPATH`` pointing at each ``src`` (alternate the runs).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from judger import NativeJudger, RolloutState
from judger.presets.base import ScorerJudger
from judger.runtime.procpool.shared import close_shared_pool
from judger.scorers.math.gsm8k import compute_score
from judger.testing.handlers import exact_match


def trivial(response: str, label: Any, extra_info: dict[str, Any]) -> dict[str, Any]:
    return {"score": 1.0 if response == label else 0.0}


async def atrivial(response: str, label: Any, extra_info: dict[str, Any]) -> dict[str, Any]:
    return {"score": 1.0 if response == label else 0.0}


def states(n: int) -> list[RolloutState]:
    return [
        RolloutState(
            message=[{"role": "user", "content": f"q{i}"}],
            response=f"so the answer is #### {i}",
            reward_model={"ground_truth": str(i % 7)},
            data_source="bench",
        )
        for i in range(n)
    ]


def judgers() -> dict[str, Any]:
    return {
        "scorer-inline": ScorerJudger("gsm8k", compute_score, {}, execution="inline"),
        "scorer-process": ScorerJudger("exact", exact_match, {}, execution="process"),
        "native-thread": NativeJudger(reward_handler=trivial, execution="thread"),
        "native-process": NativeJudger(reward_handler=exact_match, execution="process"),
        "native-async": NativeJudger(reward_handler=atrivial),
    }


async def best(judger: Any, n: int, repeat: int) -> tuple[float, float]:
    """Best wall and best CPU (this process, all its threads) microseconds per sample."""
    await judger.batch_judge(states(min(n, 500)))  # warm: workers started, handler loaded
    walls, cpus = [], []
    for _ in range(repeat):
        batch = states(n)
        t0, c0 = time.perf_counter(), time.process_time()
        await judger.batch_judge(batch)
        cpus.append(time.process_time() - c0)
        walls.append(time.perf_counter() - t0)
        assert all(s.reward is not None for s in batch)
    return min(walls) / n * 1e6, min(cpus) / n * 1e6


async def main_async(n: int, repeat: int) -> dict[str, tuple[float, float]]:
    out = {}
    for name, judger in judgers().items():
        out[name] = await best(judger, n, repeat)
        await judger.aclose()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    out = asyncio.run(main_async(args.n, args.repeat))
    close_shared_pool()
    if args.json:
        print(json.dumps(out))
        return
    print("| path | wall us / sample | CPU us / sample (this process) |\n|---|---:|---:|")
    for name, (wall, cpu) in out.items():
        print(f"| {name} | {wall:.2f} | {cpu:.2f} |")


if __name__ == "__main__":
    main()
