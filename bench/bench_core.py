"""Per-sample overhead of the judger path vs calling the reward handler directly.

    .venv/bin/python bench/bench_core.py [--n 100000] [--repeat 3]

Prints a markdown section. Both sides score the same 100,000 prebuilt RolloutStates with the same
trivial handler; the overhead is (judger time - direct time) / n, best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import timeit
from typing import Any

from judger import NativeJudger, RolloutState


def trivial(response: str, label: Any, extra_info: dict[str, Any]) -> dict[str, Any]:
    return {"score": 1.0 if response == label else 0.0}


async def atrivial(response: str, label: Any, extra_info: dict[str, Any]) -> dict[str, Any]:
    return trivial(response, label, extra_info)


def build_states(n: int) -> list[RolloutState]:
    return [
        RolloutState(
            message=[{"role": "user", "content": f"q{i}"}],
            response=str(i % 7),
            reward_model={"ground_truth": "3"},
            data_source="bench",
            prompt_ids=[1, 2, 3],
            response_ids=[4, 5, 6, 7],
        )
        for i in range(n)
    ]


def direct(states: list[RolloutState]) -> float:
    start = time.perf_counter()
    for s in states:
        s.reward = trivial(s.response, s.reward_model["ground_truth"], {})
    return time.perf_counter() - start


def through(judger: NativeJudger, states: list[RolloutState]) -> float:
    async def go() -> None:
        await judger.batch_judge(states)

    start = time.perf_counter()
    asyncio.run(go())
    return time.perf_counter() - start


def long_rollout_cost(tokens: int = 32768, n: int = 200) -> tuple[float, float]:
    """Microseconds to build one RolloutState with ``tokens`` ids, logprobs and mask: judger's
    model vs the same fields validated element by element (plain ``list[int]`` / ``list[float]``)."""
    from pydantic import BaseModel

    class ElementWise(BaseModel):
        response_ids: list[int] | None = None
        logprobs: list[float] | None = None
        response_mask: list[int] | None = None

    kwargs = {"response_ids": list(range(tokens)), "logprobs": [-0.5] * tokens, "response_mask": [1] * tokens}
    ours = timeit.timeit(lambda: RolloutState(**kwargs), number=n) / n * 1e6
    element_wise = timeit.timeit(lambda: ElementWise(**kwargs), number=n) / n * 1e6
    return ours, element_wise


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n = args.n

    t0 = time.perf_counter()
    states = build_states(n)
    build_s = time.perf_counter() - t0

    sync_judger = NativeJudger(reward_handler=trivial, execution="thread")  # the thread path's cost
    async_judger = NativeJudger(reward_handler=atrivial)
    rows: dict[str, list[float]] = {
        "direct loop": [],
        "batch_judge, sync handler": [],
        "batch_judge, async handler": [],
    }
    for _ in range(args.repeat):
        rows["direct loop"].append(direct(states))
        rows["batch_judge, sync handler"].append(through(sync_judger, states))
        rows["batch_judge, async handler"].append(through(async_judger, states))
    assert all(s.reward is not None and s.reward["score"] in (0.0, 1.0) for s in states)
    base = min(rows["direct loop"])

    print(f"### Core overhead ({n:,} prebuilt RolloutStates, trivial handler, best of {args.repeat})\n")
    print("| path | total s | us / sample | overhead us / sample |")
    print("|---|---:|---:|---:|")
    for name, times in rows.items():
        best = min(times)
        print(f"| {name} | {best:.3f} | {best / n * 1e6:.2f} | {(best - base) / n * 1e6:.2f} |")
    each = build_s / n * 1e6
    print(f"\nBuilding the {n:,} validated RolloutStates took {build_s:.2f} s ({each:.1f} us each).")
    ours, element_wise = long_rollout_cost()
    print(
        f"One RolloutState with 32,768-token response_ids, logprobs and response_mask: {ours:.1f} us "
        f"(the same fields validated element by element: {element_wise:.0f} us)."
    )


if __name__ == "__main__":
    main()
