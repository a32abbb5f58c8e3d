"""`judger score` as a whole process (start to exit) against the raw scoring loop.

    PYTHONPATH=src .venv/bin/python bench/bench_cli_score.py [--repeat 5] [--rows 10000]
        [--skip-math] [--before /work/main/src] [--math-rows 100000] [--only-stream]
        [--only-startup] [--importtime]

1. GSM8K: ``--rows`` verl-layout rows built from the bundled GSM8K test set (reference solutions,
   every fourth one with a wrong final answer; each row with its own ``extra_info``), scored by
   ``judger score`` with the default routing vs ``bench/raw_score_gsm8k.py`` (json + the scorer in
   a loop). Target <= 3x (the start-up target).
2. MATH: the 400 bundled MATH rollouts, ``judger score`` vs ``bench/raw_score_math_verify.py``
   (json + Math-Verify's parse/verify in a loop). Target <= 1.2x.
3. MATH, streamed: ``--math-rows`` verl-layout rows (default 100,000, about 186 MB) made at bench
   time from the 400 bundled rollouts (each repeat its own prompt groups), ``judger score`` with
   the default routing vs ``bench/raw_score_math_stream.py`` (one row at a time through judger's own
   MATH scorer). Targets: wall <= 1.5x, peak RSS <= 300 MB. The peak is ``wait4``'s ``ru_maxrss``:
   the largest of the command's process and those it waits for, its shard processes among them
   (forked from it; a ``--before`` tree whose shards come from a fork server, which the command
   never waits for, reports its main process only). A file this size is scored in shard
   processes (one per core); the same run in one process (``--shards 1``) is timed alongside.

   ``--steps`` adds the main process's CPU per step over the same rows (JSON decoding alone, reading
   into states, scoring, tally, metrics), measured in one process per side.

4. Start-up (``--only-startup``): the GSM8K comparison of 1. alone, against its own target of 3x
   (on 10,000 rows the whole process is mostly start-up), and the floor under it: a process that
   only imports what any judger needs and the raw script does not (RolloutState's pydantic, asyncio,
   NumPy's random for the @N metrics), timed against the raw script in rounds of its own.
   ``--importtime`` adds the heaviest imports of that ``judger score`` process (``python -X
   importtime``, cumulative).

Each side is a fresh ``python`` process, timed from spawn to exit, alternating; medians.
``--before SRC`` adds, in the same rounds, ``judger score`` run from another checkout's ``src``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "src" / "judger" / "data"


def gsm8k_rows(n: int, path: Path) -> None:
    src = [json.loads(line) for line in (DATA / "gsm8k_test.jsonl").read_text().splitlines() if line]
    with path.open("w") as f:
        for i in range(n):
            item = src[i % len(src)]
            answer = item["answer"]
            truth = answer.rsplit("####", 1)[1].strip().replace(",", "")
            response = answer if i % 4 else answer.rsplit("####", 1)[0] + "#### 0.5"
            row = {
                "data_source": "openai/gsm8k",
                "prompt": [{"role": "user", "content": item["question"]}],
                "response": response,
                "reward_model": {"style": "rule", "ground_truth": truth},
                "extra_info": {"index": i, "split": "test"},
            }
            f.write(json.dumps(row) + "\n")


def math_rows(n: int, path: Path) -> None:
    """``n`` verl-layout MATH rows: the 400 bundled rollouts over and over, each row its own prompt
    group (``uid``) and ``extra_info`` index, as a real validation dump has."""
    src = [json.loads(line) for line in (DATA / "math_rollouts_dev.jsonl").read_text().splitlines() if line]
    with path.open("w") as f:
        for i in range(n):
            row = dict(src[i % len(src)])
            row["uid"] = f"{row['uid']}-{i // len(src)}"
            row["extra_info"] = {**(row.get("extra_info") or {}), "index": i}
            f.write(json.dumps(row) + "\n")


def wall(cmd: list[str], src: Path = ROOT / "src") -> float:
    return wall_and_peak(cmd, src)[0]


def wall_and_peak(cmd: list[str], src: Path = ROOT / "src") -> tuple[float, float]:
    """Seconds from spawn to exit, and the peak RSS in MB of the largest of the process and those
    it waited for (``wait4``)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    # stderr to a file, not a pipe: a pipe would be read until the last process holding it exits
    with tempfile.TemporaryFile() as stderr:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped above
        if proc.returncode != 0:  # a run that failed fast must not read as a fast run
            stderr.seek(0)
            said = stderr.read().decode(errors="replace")[-500:]
            sys.exit(f"{' '.join(cmd)} exited with {proc.returncode}: {said}")
    return elapsed, usage.ru_maxrss / 1024


def compare_stream(rows: int, repeat: int, before: Path | None = None) -> None:
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "math_rows.jsonl"
        math_rows(rows, data)
        size = data.stat().st_size / 1e6
        judger_cmd = [py, "-m", "judger", "score", "--no-progress", "--format", "json", str(data)]
        one_cmd = [*judger_cmd, "--shards", "1"]
        raw_cmd = [py, str(ROOT / "bench" / "raw_score_math_stream.py"), str(data)]
        wall(judger_cmd)  # warm the page cache and the .pyc files
        wall(raw_cmd)
        if before is not None:
            wall(judger_cmd, before)
        ours, peaks, raw, raw_peaks, old, old_peaks, one = [], [], [], [], [], [], []
        for _ in range(repeat):
            t, peak = wall_and_peak(judger_cmd)
            ours.append(t)
            peaks.append(peak)
            one.append(wall(one_cmd))
            t, peak = wall_and_peak(raw_cmd)
            raw.append(t)
            raw_peaks.append(peak)
            if before is not None:
                t, peak = wall_and_peak(judger_cmd, before)
                old.append(t)
                old_peaks.append(peak)
    a, b = statistics.median(ours), statistics.median(raw)
    row = (
        f"| MATH streamed, {rows:,} rows ({size:.0f} MB) | {a:.2f} s | {b:.2f} s | {a / b:.2f}x | <= 1.5x "
        f"| {max(peaks):.0f} MB | {max(raw_peaks):.0f} MB | <= 300 MB |"
    )
    if before is not None:
        c = statistics.median(old)
        row += f" {c:.2f} s | {c / b:.2f}x | {max(old_peaks):.0f} MB |"
    print(row)
    c = statistics.median(one)
    print(f"\none process (--shards 1): {c:.2f} s, {c / b:.2f}x the raw stream; sharded {c / a:.2f}x faster")
    print(f"all walls: judger {[round(x, 2) for x in ours]}, raw {[round(x, 2) for x in raw]}", end="")
    print(f", before {[round(x, 2) for x in old]}" if before is not None else "")


def _steps_child(path: str) -> None:
    """Print the main process's CPU seconds per step of a ``judger score`` run over ``path``: the
    steps run one after another here (the CLI overlaps reading with scoring in a thread)."""
    import asyncio
    import gc

    from judger.cli import score
    from judger.cli.tally import Tally
    from judger.core.rollout import Status
    from judger.trainer.io import iter_rollouts

    try:
        from judger.cli.pools import close_shared_pool, start_pools
    except ImportError:  # an older checkout (--before)
        from judger.cli.score import _start_pools as start_pools  # type: ignore[attr-defined,no-redef]
        from judger.runtime.procpool.pool import close_shared_pool  # type: ignore[no-redef]

    gc.set_threshold(50_000, *gc.get_threshold()[1:])
    cpu = time.process_time
    t = cpu()
    with open(path, encoding="utf-8") as f:
        for line in f:
            json.loads(line)
    decode = cpu() - t
    t = cpu()
    chunks = list(iter_rollouts(path, score.CHUNK_ROWS))
    read = cpu() - t
    args = argparse.Namespace(config=None, preset=None, compat=None, workers=None)
    judger = score.build(args)
    start_pools(judger)
    tally = Tally(0)

    async def judge_all() -> tuple[float, float]:
        judging = adding = 0.0
        for chunk in chunks:
            t = cpu()
            states = [s for s in chunk.states if s.status == Status.COMPLETED]
            await score.score_states(judger, states, 256)
            judging += cpu() - t
            t = cpu()
            tally.add(chunk.states)
            adding += cpu() - t
        await judger.aclose()
        return judging, adding

    judging, adding = asyncio.run(judge_all())
    t = cpu()
    tally.summary(1.0)
    metrics = cpu() - t
    from judger.runtime.procpool.shared import shared_pool

    handed = shared_pool().stats()["calls"]  # answers that crossed to a worker process
    close_shared_pool()
    print(
        f"JSON decoding alone {decode:.2f} s | reading into states (JSON included) {read:.2f} s | "
        f"scoring {judging:.2f} s | tally {adding:.2f} s | metrics and summary {metrics:.2f} s | "
        f"answers graded on a worker: {handed:,}"
    )


def cpu_steps(rows: int, before: Path | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "math_rows.jsonl"
        math_rows(rows, data)
        sides = [("judger", ROOT / "src")] + ([("before", before)] if before is not None else [])
        print(f"\nmain-process CPU per step, {rows:,} MATH rows:")
        for name, src in sides:
            env = {**os.environ, "PYTHONPATH": str(src)}
            cmd = [sys.executable, str(Path(__file__).resolve()), "--steps-child", str(data)]
            done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
            print(f"  {name}: {done.stdout.strip() or done.stderr.strip()[-300:]}")


def heaviest_imports(cmd: list[str], top: int = 15) -> None:
    """The ``top`` imports of ``cmd`` by cumulative time (``python -X importtime``), nested ones
    included: a module's line counts what it pulled in."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [cmd[0], "-X", "importtime", *cmd[1:]], capture_output=True, text=True, env=env, check=False
    )
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split("|", 2)
        if cumulative.strip().isdigit():
            rows.append((int(cumulative), name.rstrip()))
    print(f"\nheaviest imports of `judger score` (cumulative, -X importtime), top {top}:\n")
    for micros, name in sorted(rows, reverse=True)[:top]:
        print(f"    {micros / 1000:7.1f} ms  {name}")


def compare(
    name: str, judger_cmd: list[str], raw_cmd: list[str], repeat: int, target: str, before: Path | None
) -> None:
    wall(judger_cmd)  # warm the page cache and the .pyc files
    wall(raw_cmd)
    if before is not None:
        wall(judger_cmd, before)
    ours, raw, old = [], [], []
    for _ in range(repeat):
        ours.append(wall(judger_cmd))
        raw.append(wall(raw_cmd))
        if before is not None:
            old.append(wall(judger_cmd, before))
    a, b = statistics.median(ours), statistics.median(raw)
    row = f"| {name} | {a:.2f} s | {b:.2f} s | {a / b:.2f}x | {target} |"
    if before is not None:
        c = statistics.median(old)
        row += f" {c:.2f} s | {c / b:.2f}x |"
    print(row)


# what any judger must import that the raw script does not: RolloutState (pydantic), asyncio
# (batch_judge is a coroutine), NumPy's random (the @N metrics' bootstrap, verl's to the bit)
_FLOOR_IMPORTS = "import json, judger.scorers.math.gsm8k, judger.core.rollout, asyncio, numpy.random"


def imports_floor(raw_cmd: list[str], repeat: int) -> None:
    """A process doing nothing but :data:`_FLOOR_IMPORTS`, against the raw script, alternating."""
    floor_cmd = [sys.executable, "-c", _FLOOR_IMPORTS]
    wall(floor_cmd)
    floor, raw = [], []
    for _ in range(repeat):
        floor.append(wall(floor_cmd))
        raw.append(wall(raw_cmd))
    a, b = statistics.median(floor), statistics.median(raw)
    print(
        f"\nthe imports alone (`{_FLOOR_IMPORTS}`, nothing read or scored): {a:.2f} s, "
        f"{a / b:.2f}x the raw script's whole run ({b:.2f} s) in the same rounds"
    )


def table_head(before: Path | None, extra: str = "") -> None:
    """The header of a result table; ``extra``: more columns after the target (" a | b |")."""
    columns = f"| input | judger score | raw | ratio | target |{extra}"
    if before is not None:
        columns += " before | ratio before |" + (" before peak |" if extra else "")
    print(columns)
    print("|---|---:|---:|---:|---|" + "---:|" * (columns.count("|") - 6))


def only_stream(args: argparse.Namespace, before: Path | None) -> None:
    load = os.getloadavg()[0]
    table_head(before, " peak RSS | raw peak RSS | target |")
    compare_stream(args.math_rows, args.repeat, before)
    print(f"\n{os.cpu_count()} CPUs; 1-minute load average at start {load:.1f}.")


def only_startup(args: argparse.Namespace, before: Path | None) -> None:
    load = os.getloadavg()[0]
    py = sys.executable
    score = [py, "-m", "judger", "score", "--no-progress", "--format", "json"]
    table_head(before)
    with tempfile.TemporaryDirectory() as tmp:
        gsm = Path(tmp) / "gsm8k.jsonl"
        gsm8k_rows(args.rows, gsm)
        raw = [py, str(ROOT / "bench" / "raw_score_gsm8k.py"), str(gsm)]
        compare(f"GSM8K, {args.rows:,} rows", [*score, str(gsm)], raw, args.repeat, "<= 3x", before)
        imports_floor(raw, args.repeat)
        if args.importtime:
            heaviest_imports([*score, str(gsm)])
    print(f"\n{os.cpu_count()} CPUs; 1-minute load average at start {load:.1f}.")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--skip-math", action="store_true", help="only the GSM8K comparison")
    ap.add_argument(
        "--before",
        type=Path,
        help="another checkout's src/ (e.g. /work/main/src): its `judger score` timed in the same rounds",
    )
    ap.add_argument("--math-rows", type=int, default=100_000, help="rows of the streamed MATH run")
    ap.add_argument("--only-stream", action="store_true", help="only the streamed MATH run")
    ap.add_argument("--only-startup", action="store_true", help="only the GSM8K whole-process run (<= 3x)")
    ap.add_argument("--importtime", action="store_true", help="with --only-startup: the heaviest imports")
    ap.add_argument("--steps", action="store_true", help="with --only-stream: main-process CPU per step")
    ap.add_argument("--steps-child", metavar="FILE", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.steps_child:
        _steps_child(args.steps_child)
        return
    before = args.before.resolve() if args.before else None
    if args.only_stream:
        only_stream(args, before)
        if args.steps:
            cpu_steps(args.math_rows, before)
        return
    if args.only_startup:
        only_startup(args, before)
        return
    py = sys.executable
    score = [py, "-m", "judger.cli.main", "score", "--no-progress", "--format", "json"]
    load = os.getloadavg()[0]
    print("### `judger score`, whole process\n")
    if before is None:
        print("| input | judger score | raw loop | ratio | target |")
        print("|---|---:|---:|---:|---|")
    else:
        print("| input | judger score | raw loop | ratio | target | before | ratio before |")
        print("|---|---:|---:|---:|---|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        gsm = Path(tmp) / "gsm8k.jsonl"
        gsm8k_rows(args.rows, gsm)
        compare(
            f"GSM8K, {args.rows:,} rows",
            [*score, str(gsm)],
            [py, str(ROOT / "bench" / "raw_score_gsm8k.py"), str(gsm)],
            args.repeat,
            "<= 3x",
            before,
        )
    math_rows = DATA / "math_rollouts_dev.jsonl"
    if args.skip_math:
        print(f"\n{os.cpu_count()} CPUs; 1-minute load average at start {load:.1f}.")
        return
    compare(
        "MATH, 400 bundled rows",
        [*score, str(math_rows)],
        [py, str(ROOT / "bench" / "raw_score_math_verify.py"), str(math_rows)],
        args.repeat,
        "<= 1.2x",
        before,
    )
    print("\n| input | judger score | raw stream | ratio | target | peak RSS | raw peak RSS | target |")
    print("|---|---:|---:|---:|---|---:|---:|---|")
    compare_stream(args.math_rows, args.repeat)
    print(f"\n{os.cpu_count()} CPUs; 1-minute load average at start {load:.1f}.")


if __name__ == "__main__":
    main()
