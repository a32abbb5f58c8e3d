"""Time from process start to the first scored sample, verl's scorer against judger's, in fresh processes.

Runs in the client tier's environment (``make test-clients`` builds it)::

    .venv-clients/bin/python bench/bench_startup.py [--repeats 5] [--only NAME ...]

Each case is a fresh interpreter (``python -c``) that imports what a verl worker imports and
scores its first sample(s); the time is taken from just before the process is started to the
moment the child has its score (the child writes ``time.time()`` then), so interpreter start-up,
imports, pool start-up and the scoring itself all count, and the child's exit does not. The
second time is the first scoring call alone (imports and set-up done: what a pool that blocks
costs). Cases run in turn, round by round (alternated), and the median of ``--repeats`` rounds is
printed with its ratio to verl's own scorer in the same path.

- ``verl fn`` / ``judger fn``: ``default_compute_score`` called once on a MATH sample whose answer
  is an integer (verl's ``default_compute_score`` against judger's, default mode);
- ``judger fn, parser``: judger's, on an answer only Math-Verify decides (``\\frac{\\pi}{2}`` against
  ``\\pi/2``): the process pool must start for it;
- ``verl legacy`` / ``judger legacy``: verl's legacy ``NaiveRewardManager`` on the first 16 rows
  of the bundled MATH responses, with verl's ``default_compute_score`` and with judger's;
- ``verl loop`` / ``judger loop``: verl's reward loop (``RewardLoopWorker.compute_score_batch``,
  what verl's trainer runs per step) on those 16 rows, verl's default against the verl guide's first
  recipe (``reward.custom_reward_function.path=pkg://judger.compat.verl``).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MATH = "DigitalLearningGmbH/MATH-lighteval"

_MARK = "import time, sys; sys.stdout.write(f'{name} {{time.time()!r}}\\n'); sys.stdout.flush()\n"

_FN = """
from {module} import default_compute_score
#CALL
default_compute_score({source!r}, {response!r}, {gold!r})
"""

_ROWS = """
import json, sys
sys.path.insert(0, {clients!r})
from conftest import byte_tokenizer
from test_verl_client import make_data
from judger.trainer.io import example_data
lines = example_data("math_rollouts_dev.jsonl").read_text().splitlines()[:16]
rows = [json.loads(line) for line in lines]
samples = [(r["data_source"], r["response"], r["reward_model"]["ground_truth"]) for r in rows]
"""

_LEGACY = (
    _ROWS
    + """
from verl.workers.reward_manager import NaiveRewardManager
from {module} import default_compute_score
tokenizer = byte_tokenizer()
data = make_data(tokenizer, samples, width=max(len(tokenizer.encode(s[1])) for s in samples))
#CALL
NaiveRewardManager(tokenizer, 0, default_compute_score)(data)
"""
)

_LOOP = (
    _ROWS
    + """
import asyncio
from test_verl_client import compose
from verl.experimental.reward_loop import RewardLoopWorker
asyncio.set_event_loop(asyncio.new_event_loop())
worker = RewardLoopWorker(compose({keys!r}, __import__("pathlib").Path({model!r})), None)
data = make_data(worker.input_tokenizer, samples, width=4096)
#CALL
worker.loop.run_until_complete(worker.compute_score_batch(data))
"""
)

_JUDGER_KEYS = [
    "reward.custom_reward_function.path=pkg://judger.compat.verl",
    "reward.custom_reward_function.name=default_compute_score",
]


def cases(model_dir: str) -> dict[str, str]:
    clients = str(ROOT / "tests" / "clients")
    fn = {"source": MATH, "response": "so the answer is \\boxed{42}.", "gold": "42"}
    return {
        "verl fn": _FN.format(module="verl.utils.reward_score", **fn),
        "judger fn": _FN.format(module="judger.compat.verl", **fn),
        "judger fn, parser": _FN.format(
            module="judger.compat.verl", source=MATH, response="\\boxed{\\frac{\\pi}{2}}", gold="\\pi/2"
        ),
        "verl legacy": _LEGACY.format(clients=clients, module="verl.utils.reward_score"),
        "judger legacy": _LEGACY.format(clients=clients, module="judger.compat.verl"),
        "verl loop": _LOOP.format(clients=clients, keys=[], model=model_dir),
        "judger loop": _LOOP.format(clients=clients, keys=_JUDGER_KEYS, model=model_dir),
    }


def first_score_seconds(code: str) -> tuple[float, float]:
    """Seconds from starting ``python -c code`` to its first score, and of its first scoring call."""
    code = code.replace("#CALL\n", _MARK.format(name="CALL")) + _MARK.format(name="DONE")
    start = time.time()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    marks = dict(line.split() for line in proc.stdout.splitlines() if line.startswith(("CALL ", "DONE ")))
    if proc.returncode != 0 or len(marks) != 2:
        raise RuntimeError(f"case failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return float(marks["DONE"]) - start, float(marks["DONE"]) - float(marks["CALL"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", nargs="*", help="case names (default: all)")
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT / "tests" / "clients"))
    from conftest import byte_tokenizer

    with tempfile.TemporaryDirectory() as model_dir:
        byte_tokenizer(Path(model_dir))
        table = cases(model_dir)
        names = [n for n in table if not args.only or n in args.only]
        starts: dict[str, list[float]] = {name: [] for name in names}
        calls: dict[str, list[float]] = {name: [] for name in names}
        for round_ in range(args.repeats):
            for name in names if round_ % 2 == 0 else reversed(names):
                to_score, call = first_score_seconds(table[name])
                starts[name].append(to_score)
                calls[name].append(call)
    print(f"median of {args.repeats} fresh processes; ratios to verl's scorer in the same path")
    print(f"{'case':20} {'start->score s':>14} {'vs verl':>8} {'first call s':>13} {'vs verl':>8}")
    for name in names:
        base = "verl " + name.split()[1].rstrip(",")
        row = f"{name:20}"
        for table_ in (starts, calls):
            median = statistics.median(table_[name])
            ratio = (
                f"{median / statistics.median(table_[base]):7.2f}x" if base in table_ and base != name else ""
            )
            row += f" {median:13.3f} {ratio:>8}"
        print(row)


if __name__ == "__main__":
    main()
