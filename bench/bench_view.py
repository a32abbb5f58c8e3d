"""`judger view` on a large scored file: start-up, first page, each filter, the group and diff views, memory.

Generates ``--rows`` scored rows (``judger score -o`` layout: 8 responses a prompt, three
data_sources, about 1.5 kB a response, 1% judge failures) and a second file with 5% of the verdicts
flipped, and starts ``judger view`` as a user does: one file, then two, each with no index kept
(cold) and with one (warm, a second opening). Timed over HTTP from the start of the process: the
first page (``/``) and its first data call (50 samples) answering 200, a filter while the file is
still indexed, the whole file indexed; then each filter and sort, a group and the diff (medians of
``--repeat`` runs). Memory: the server's resident set and peak (``VmHWM``); at the end, the peak of
any process, the indexing workers included.

    python bench/bench_view.py [--rows 100000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import statistics
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
    """The median time of ``paths`` fetched in turn, over ``repeat`` runs; and the last body."""
    times, body = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        for path in paths:
            response = client.get(path)
            response.raise_for_status()
            body = response.json() if path != "/" else None
        times.append(time.perf_counter() - start)
    return statistics.median(times), body


def until_ok(client: httpx.Client, path: str, start: float, deadline: float = 600) -> float:
    """Seconds from ``start`` until ``path`` first answers 200."""
    while time.perf_counter() - start < deadline:
        try:
            if client.get(path).status_code == 200:
                return time.perf_counter() - start
        except httpx.TransportError:
            pass
        time.sleep(0.01)
    raise TimeoutError(f"{path} did not answer in {deadline} s")


def queries(rows: int) -> dict[str, list[str]]:
    return {
        "first page (meta, summary, 50 samples)": ["api/meta", "api/summary", "api/samples?limit=50"],
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
        "last page": [f"api/samples?offset={rows - 50}"],
        "group view (8 rows read back)": [f"api/group/{rows // 2}"],
        "diff, first 50": ["api/diff?limit=50"],
    }


SRC = Path(__file__).resolve().parents[1] / "src"


def _env(src: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(src) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def interpreter_start(src: Path) -> float:
    """Seconds to start Python and import judger's CLI: what any `judger` command costs first."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import judger.cli.main"], check=True, env=_env(src))
    return time.perf_counter() - start


def session(
    files: list[Path], cache: Path | None, rows: int, repeat: int, label: str, src: Path = SRC
) -> None:
    """One ``judger view FILES`` as a user starts it: first page, filters while indexing and after
    (``cache`` None: a checkout whose view keeps no index)."""
    env = _env(src)
    kept = ["--cache-dir", str(cache)] if cache is not None else []
    command = [sys.executable, "-m", "judger", "view", *map(str, files), "--no-browser", *kept]
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    print(f"\n== {label}: judger view {' '.join(f.name for f in files)}")
    try:
        assert proc.stdout is not None
        url = re.search(r"http://127\.0\.0\.1:\d+/", proc.stdout.readline())
        assert url, "judger view did not start"
        with httpx.Client(base_url=url.group(0), timeout=120) as client:
            page = until_ok(client, "/", start)
            data = until_ok(client, "api/samples?limit=50", start)
            summary = until_ok(client, "api/summary", start)
            print(
                f"  time to first page: / {page:.2f} s; its first 50 samples {data:.2f} s;"
                f" summary {summary:.2f} s"
            )
            meta = client.get("api/meta").json()
            meta.setdefault("complete", True)
            if not meta["complete"]:
                shown = meta["files"][0]["samples"]
                best, _ = timed(client, ["api/samples?verdict=wrong&q=square&sort=-length"], repeat)
                print(f"  while indexing ({shown} samples shown): a filter {best * 1000:.1f} ms")
            while not meta["complete"]:
                assert not any(f["error"] for f in meta["files"]), meta
                time.sleep(0.05)
                meta = client.get("api/meta").json()
            print(
                f"  whole file(s) indexed: {time.perf_counter() - start:.2f} s"
                f" (kept before: {[f.get('cached') for f in meta['files']]})"
            )
            print(f"  server memory when indexed: {memory(proc.pid)}")
            for name, paths in queries(rows).items():
                if name.startswith("diff") and len(files) < 2:
                    continue
                best, body = timed(client, paths, repeat)
                total = body.get("total", body.get("n")) if isinstance(body, dict) else None
                print(f"    {name:40s} {best * 1000:7.1f} ms  (total {total})")
            print(f"  server memory after the queries: {memory(proc.pid)}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5, help="median of this many runs of each query")
    parser.add_argument(
        "--baseline", type=Path, metavar="SRC", help="another checkout's src/ to time the same way, one file"
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="with --baseline: rounds of baseline then this checkout, cold"
    )
    parser.add_argument("--only-baseline", action="store_true", help="with --baseline: only the rounds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "a.jsonl", Path(tmp) / "b.jsonl"
        generate(a, args.rows, 0.0, 1)
        generate(b, args.rows, 0.05, 1)
        print(f"{args.rows} rows, {a.stat().st_size / 1e6:.0f} MB a file")
        cache = Path(tmp) / "cache"
        print(f"Python and judger's imports alone: {interpreter_start(SRC):.2f} s")
        for _ in range(args.rounds if args.baseline else 0):
            session([a], None, args.rows, args.repeat, f"baseline {args.baseline}, one file", args.baseline)
            shutil.rmtree(cache, ignore_errors=True)
            session([a], cache, args.rows, args.repeat, "one file, cold (not indexed before)")
        if not (args.baseline and args.only_baseline):
            sessions(a, b, cache, args)
        print(f"Python and judger's imports alone: {interpreter_start(SRC):.2f} s")
        # the largest resident set of the server and of its worker processes, all exited by now
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"\npeak resident set of any process (server or indexing worker): {peak:.0f} MiB")


def sessions(a: Path, b: Path, cache: Path, args: argparse.Namespace) -> None:
    shutil.rmtree(cache, ignore_errors=True)
    session([a], cache, args.rows, args.repeat, "one file, cold (not indexed before)")
    session([a], cache, args.rows, args.repeat, "one file, warm (its index kept)")
    session([a, b], cache, args.rows, args.repeat, "two files, b cold (a kept)")
    shutil.rmtree(cache)
    session([a, b], cache, args.rows, args.repeat, "two files, both cold")
    session([a, b], cache, args.rows, args.repeat, "two files, warm")


if __name__ == "__main__":
    main()
