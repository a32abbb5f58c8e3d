"""`judger view` on a large scored file: start-up, first page, each filter, the group and diff views, memory.

Generates ``--rows`` scored rows (``judger score -o`` layout: 8 responses a prompt, three
data_sources, about 1.5 kB a response, 1% judge failures) and a second file with 5% of the verdicts
flipped, starts ``judger view A B --no-browser`` as a user does, and times over HTTP: the start-up
(until the URL is printed), the first page (what the page asks for when it opens: meta, summary,
first 50 samples), each filter and sort, a group and the diff. Memory: the server's resident set
after start-up, its peak (``VmHWM``), and both again after every query.

    python bench/bench_view.py [--rows 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

SOURCES = ("DigitalLearningGmbH/MATH-lighteval", "openai/gsm8k", "lighteval/MATH")
WORDS = [
    "the",
    "answer",
    "is",
    "we",
    "compute",
    "first",
    "then",
    "so",
    "therefore",
    "sum",
    "product",
    "root",
    "square",
    "value",
    "of",
]


def generate(path: Path, rows: int, flip: float, seed: int) -> None:
    rng = random.Random(seed)
    with path.open("w") as fh:
        for i in range(rows):
            uid = f"p{i // 8}"
            gold = str((i // 8) % 97)
            right = (rng.random() < 0.6) != (rng.random() < flip)
            pred = gold if right else str(int(gold) + 1)
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(100, 400)))
            row: dict[str, Any] = {
                "data_source": SOURCES[(i // 8) % 3],
                "uid": uid,
                "prompt": [{"role": "user", "content": f"Problem {uid}: what is $x^2 + {gold}$ at $x=0$?"}],
                "response": f"{words} so $x^2 + {gold} = {pred}$ and \\boxed{{{pred}}}",
                "reward_model": {"style": "rule", "ground_truth": gold},
                "extra_info": {"index": i // 8},
            }
            if i % 100 == 99:
                row |= {
                    "reward": None,
                    "score": None,
                    "status": "failed",
                    "error_msg": "JudgeTimeoutError: 10 s" if i % 200 == 199 else "ValueError: bad latex",
                    "judge_failure": {"judger": "math", "kind": "timeout" if i % 200 == 199 else "error"},
                }
            else:
                score = 1.0 if right else 0.0
                row |= {"reward": {"score": score, "acc": right, "pred": pred}, "score": score}
                row["status"] = "completed"
            fh.write(json.dumps(row) + "\n")


def memory(pid: int) -> dict[str, float]:
    """The server's memory in MiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    out = {}
    # RssFile: pages of the memory-mapped text columns (page cache, reclaimable); RssAnon: the heap
    for key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
        match = re.search(rf"{key}:\s+(\d+) kB", status)
        out[key] = round(int(match.group(1)) / 1024) if match else float("nan")
    return out


def timed(client: httpx.Client, paths: list[str], repeat: int) -> tuple[float, Any]:
    best, body = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        for path in paths:
            response = client.get(path)
            response.raise_for_status()
            body = response.json() if path != "/" else None
        best = min(best, time.perf_counter() - start)
    return best, body


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "a.jsonl", Path(tmp) / "b.jsonl"
        generate(a, args.rows, 0.0, 1)
        generate(b, args.rows, 0.05, 1)
        print(f"{args.rows} rows, {a.stat().st_size / 1e6:.0f} MB a file")
        src = str(Path(__file__).resolve().parents[1] / "src")
        env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "judger", "view", str(a), str(b), "--no-browser"],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            assert proc.stdout is not None
            url = re.search(r"http://127\.0\.0\.1:\d+/", proc.stdout.readline())
            assert url, "judger view did not start"
            with httpx.Client(base_url=url.group(0), timeout=60) as client:
                while True:
                    try:
                        client.get("api/meta")
                        break
                    except httpx.TransportError:
                        time.sleep(0.01)
                startup = time.perf_counter() - start
                print(f"start-up (both files read and indexed, diff paired): {startup:.2f} s")
                print(f"memory after start-up: {memory(proc.pid)}")
                first, _ = timed(client, ["/", "api/meta", "api/summary", "api/samples?limit=50"], 1)
                print(f"first page (/, meta, summary, 50 samples), cold: {first * 1000:.0f} ms")
                queries = {
                    "first page, warm": ["api/meta", "api/summary", "api/samples?limit=50"],
                    "verdict=wrong": ["api/samples?verdict=wrong"],
                    "verdict=timed_out": ["api/samples?verdict=timed_out"],
                    "data_source": [f"api/samples?source={SOURCES[1]}"],
                    "score in [0.5, 1]": ["api/samples?min_score=0.5&max_score=1"],
                    "text search 'product root'": ["api/samples?q=product%20root"],
                    "text search, no hit": ["api/samples?q=zzzzqqq"],
                    "sort by -length": ["api/samples?sort=-length"],
                    "all filters + sort": [
                        f"api/samples?source={SOURCES[0]}&verdict=right&min_score=0.5&q=square&sort=-length"
                    ],
                    "last page": [f"api/samples?offset={args.rows - 50}"],
                    "group view (8 rows read back)": [f"api/group/{args.rows // 2}"],
                    "diff, first 50": ["api/diff?limit=50"],
                }
                for name, paths in queries.items():
                    best, body = timed(client, paths, args.repeat)
                    total = body.get("total", body.get("n")) if isinstance(body, dict) else None
                    print(f"  {name:32s} {best * 1000:7.1f} ms  (total {total})")
                print(f"memory after the queries: {memory(proc.pid)}")
        finally:
            proc.terminate()
            proc.wait(timeout=10)


if __name__ == "__main__":
    main()
