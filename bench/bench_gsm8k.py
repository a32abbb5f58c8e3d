"""GSM8K: ``GSM8KJudgerConfig().build().batch_judge`` vs calling verl's gsm8k scorer directly.

Setup (once; bench/.cache is git-ignored):

    .venv/bin/pip download verl --no-deps -d bench/.cache/
    .venv/bin/python bench/bench_gsm8k.py            # finds the wheel there and extracts gsm8k.py

The 100,000 responses are built from ../shared/data/gsm8k_test.jsonl (reference solutions with
correct, wrong, reformatted and malformed final answers, mostly distinct). Prints a markdown
section: throughput of both, their ratio (target >= 0.8x), and whether judger's compat="verl" scores
equal verl's on every response. Two rows split judger's time: its batch scorer alone over the same
two lists, and the floor (``batch_judge`` with a scorer that hands back rewards made beforehand:
reading each state's response and label and writing its reward, nothing else).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import glob
import importlib.util
import json
import os
import platform
import random
import re
import sys
import time
import zipfile
from collections.abc import Callable
from types import ModuleType
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(ROOT, "bench", ".cache")
DATA = os.path.join(ROOT, "..", "shared", "data", "gsm8k_test.jsonl")
VERL_MEMBER = "verl/utils/reward_score/gsm8k.py"


def load_verl_gsm8k() -> tuple[ModuleType, str]:
    wheels = sorted(glob.glob(os.path.join(CACHE, "verl-*.whl")))
    if not wheels:
        sys.exit(
            "no verl wheel in bench/.cache: run `.venv/bin/pip download verl --no-deps -d bench/.cache/`"
        )
    wheel = wheels[-1]
    target = os.path.join(CACHE, "verl_wheel")
    with zipfile.ZipFile(wheel) as archive:
        archive.extract(VERL_MEMBER, target)
    path = os.path.join(target, VERL_MEMBER)
    spec = importlib.util.spec_from_file_location("verl_gsm8k_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, os.path.basename(wheel)


def ground_truth_of(answer: str) -> str:
    # verl's examples/data_preprocess/gsm8k.py
    return re.search("#### (\\-?[0-9\\.\\,]+)", answer).group(0).split("#### ")[1].replace(",", "")  # type: ignore[union-attr]


def with_commas(number: str) -> str:
    return f"{int(number):,}" if number.lstrip("-").isdigit() else number


def build_responses(n: int, seed: int = 0) -> list[tuple[str, str]]:
    with open(DATA, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    rng = random.Random(seed)
    out: list[tuple[str, str]] = []
    for k in range(n):
        row = rows[k % len(rows)]
        gt = ground_truth_of(row["answer"])
        body = row["answer"].rsplit("####", 1)[0].rstrip()
        # a distinct preamble per sample so that batch dedup does not make the comparison trivial
        preamble = f"Let me solve problem {k} step by step (attempt {rng.randrange(10**6)}).\n"
        kind = rng.random()
        if kind < 0.35:
            final = f"#### {gt}"
        elif kind < 0.45:
            final = rng.choice(
                [f"#### {gt}.", f"#### ${with_commas(gt)}", f"#### {gt}.00", f"#### {with_commas(gt)}"]
            )
        elif kind < 0.75:
            wrong = str(int(float(gt)) + rng.choice([-10, -2, -1, 1, 3, 7, 100]))
            final = f"#### {wrong}"
        elif kind < 0.9:
            final = f"The answer is {gt}."
        else:
            final = "I am not sure about the final answer."
        if rng.random() < 0.2:
            body = body + "\n" + body  # longer than the 300-character window
        out.append((preamble + body + "\n" + final, gt))
    return out


Prepared = Callable[[], Callable[[], Any]]
"""Makes one round's input (not timed) and hands back the call to time."""


PATHS = {
    "verl": "verl `gsm8k.compute_score` loop (raw)",
    "default": "judger `GSM8KJudgerConfig()` (default)",
    "compat": 'judger `GSM8KJudgerConfig(compat="verl")`',
    "scorer_default": "judger's batch scorer alone over the same lists (default)",
    "scorer_compat": 'judger\'s batch scorer alone over the same lists (compat="verl")',
    "floor": "judger's `batch_judge` with no scoring, rewards made beforehand (the floor)",
}


def paths(pairs: list[tuple[str, str]], verl_score: Callable[[str, str], float]) -> dict[str, Prepared]:
    """Each of :data:`PATHS` over ``pairs``, ready to prepare."""
    from judger import GSM8KJudgerConfig, RolloutState
    from judger.scorers.math.gsm8k import make_batch_scorer

    def run_verl() -> Callable[[], list[float]]:
        return lambda: [verl_score(response, gt) for response, gt in pairs]

    def judge(compat: str | None, batch_scorer: Any = None) -> Prepared:
        judger = GSM8KJudgerConfig(compat=compat).build()
        if batch_scorer is not None:
            judger.batch_scorer = batch_scorer

        def prepare() -> Callable[[], list[RolloutState]]:
            # fresh states each round, as a trainer hands them over (no reward yet): judging the same
            # states again would free the last round's rewards on the clock
            batch = [RolloutState(response=r, reward_model={"ground_truth": gt}) for r, gt in pairs]
            return lambda: asyncio.run(judger.batch_judge(batch))

        return prepare

    responses, labels = [r for r, _ in pairs], [gt for _, gt in pairs]

    def scorer_alone(compat: str | None) -> Prepared:
        """judger's batch scorer over the same two lists: what ``batch_judge`` adds is the rest."""
        scorer = make_batch_scorer(compat)
        return lambda: lambda: scorer(responses, labels)

    # the floor: a scorer that hands back rewards made beforehand, so that judger's time is about the
    # floor plus the scorer-alone row (which makes the dicts), counting nothing twice
    made = [{"score": 0.0} for _ in pairs]

    def no_scoring(responses: Any, labels: Any) -> list[dict[str, Any]]:
        return made[: len(responses)]

    return {
        "verl": run_verl,
        "default": judge(None),
        "compat": judge("verl"),
        "scorer_default": scorer_alone(None),
        "scorer_compat": scorer_alone("verl"),
        "floor": judge(None, no_scoring),
    }


def interleaved(repeats: int, runs: dict[str, Prepared]) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """Times of each run in each of ``repeats`` rounds, the runs alternating inside every round so
    that load from other processes on a shared machine hits them alike. Each round's input is made
    before its clock starts, and the last round's value is kept for checking."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    values: dict[str, Any] = {}
    for _ in range(repeats):
        for name, prepare in runs.items():
            values.pop(name, None)  # the last round's output is freed here, not on the clock
            call = prepare()
            gc.collect()
            # CPU time of this process: on a shared machine, time spent descheduled is not ours
            start = time.process_time()
            values[name] = call()
            times[name].append(time.process_time() - start)
    return times, values


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=11)
    args = parser.parse_args()

    verl, wheel = load_verl_gsm8k()
    pairs = build_responses(args.n)
    n = len(pairs)

    runs = paths(pairs, verl.compute_score)
    times, values = interleaved(args.repeats, runs)
    # the rewards are read from the states after timing: the trainer reads them as it reads verl's list
    verl_scores = values["verl"]
    ours = [s.reward for s in values["default"]]
    compat = [s.reward for s in values["compat"]]
    best = {name: min(ts) for name, ts in times.items()}

    def ratio(name: str) -> tuple[float, float]:
        """verl time / our time: of the best runs, and the median over rounds (same-round pairs)."""
        per_round = sorted(v / o for v, o in zip(times["verl"], times[name]))
        return best["verl"] / best[name], per_round[len(per_round) // 2]

    mismatches = [i for i in range(n) if float(verl_scores[i]) != compat[i]["score"]]
    fixed = sum(1 for i in range(n) if ours[i]["acc"] and float(verl_scores[i]) != 1.0)
    lost = sum(1 for i in range(n) if not ours[i]["acc"] and float(verl_scores[i]) == 1.0)
    verl_correct = sum(1 for s in verl_scores if float(s) == 1.0)

    print(f"## GSM8K: `GSM8KJudgerConfig().build()` vs verl's gsm8k scorer ({n:,} responses)\n")
    print(f"Machine: {os.cpu_count()} CPUs, Python {platform.python_version()}; verl scorer from `{wheel}`.")
    print(
        f"{args.repeats} interleaved rounds (verl, default, compat in each), CPU time of the process "
        "(`time.process_time`); judger times cover `await judger.batch_judge(states)` end to end "
        "(fresh states built before each round's clock starts, rewards read after it stops).\n"
    )
    print("| path | best CPU seconds | responses/s | vs verl (best) | vs verl (median round) |")
    print("|---|---:|---:|---:|---:|")
    for name, label in PATHS.items():
        of_best, median = ratio(name)
        print(f"| {label} | {best[name]:.3f} | {n / best[name]:,.0f} | {of_best:.2f}x | {median:.2f}x |")
    print()
    # judger's time is about floor + scorer: 0.8x of verl leaves the scorer 1/0.8 - floor/verl of verl's time
    room = 1 / 0.8 - best["floor"] / best["verl"]
    print(
        f"- the floor alone takes {best['floor'] / best['verl']:.2f}x verl's whole loop's time: for 0.8x, "
        "judger's scorer would have to run "
        + (f"{1 / room:.2f}x as fast as verl's" if room > 0 else "in no time at all")
        + " (the scorer alone runs at the two scorer rows above)"
    )
    print(
        f'- compat="verl" scores equal to verl\'s: {n - len(mismatches):,} / {n:,} '
        f"({'all equal' if not mismatches else f'{len(mismatches)} differ, first {mismatches[:5]}'})"
    )
    print(
        f"- verl scores {verl_correct:,} correct; the default mode scores {fixed:,} more correct "
        f"(the `#### 1234.`, `#### $1,234` and `#### 1234.00` forms) and {lost:,} fewer"
    )


if __name__ == "__main__":
    main()
