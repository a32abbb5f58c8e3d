"""What sync reward-handler calls that never return cost afterwards, on threads and in judger's
killable worker processes (the default for a handler a worker can load).

- library: a trivial batch (2,000 distinct samples) timed before and after 4 calls that spin for
  good and overrun ``timeout``, and the CPU this process burns in the 2 s after them;
- ``judger serve`` (a real process on 127.0.0.1, ``timeout=2``): 80 requests whose handler sleeps
  for good, then 20 ordinary ones: how each is answered, and when the last ordinary one is.

    python bench/bench_hung_handlers.py              # both
    python bench/bench_hung_handlers.py --no-serve   # the library part only
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from judger import NativeJudger, RolloutState

HANDLER = "judger.testing.handlers:spinning"  # spins for good on the response "spin"
CONFIG = """
import time
from judger import JudgerConfig

def handler(response, label, extra_info):
    if response == "hang":
        time.sleep(3600)
    return {"score": float(response == label)}

judger_config = JudgerConfig(judger_name="hung", reward_handler=handler)
"""


def _states(n: int, text: str | None = None) -> list[RolloutState]:
    return [RolloutState(response=text or str(i), reward_model={"ground_truth": "1"}) for i in range(n)]


async def _best_of(judger: NativeJudger, n: int, runs: int = 5) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        out = await judger.batch_judge(_states(n))
        best = min(best, time.perf_counter() - started)
        failed = [s.error_msg for s in out if s.reward is None]
        assert not failed, f"{len(failed)} trivial samples failed: {failed[0]}"
    return best


async def library(execution: str) -> dict[str, Any]:
    judger = NativeJudger(reward_handler=HANDLER, timeout=0.5, execution=execution)  # type: ignore[arg-type]
    before = await _best_of(judger, 2000)
    hung = await judger.batch_judge(_states(4, "spin"))
    assert all(s.extra_fields["judge_failure"]["kind"] == "timeout" for s in hung)
    cpu = time.process_time()
    await asyncio.sleep(2.0)
    burned = time.process_time() - cpu
    after = await _best_of(judger, 2000)
    return {"where": judger.execution, "before": before, "after": after, "idle_cpu": burned}


def _serve(cfg: Path, port: int, extra: list[str]) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable,
        "-m",
        "judger.cli.main",
        "serve",
        str(cfg),
        "--port",
        str(port),
        "--set",
        "timeout=2",
    ]
    env = {k: v for k, v in os.environ.items() if k != "JUDGER_SERVER_TOKEN"}
    return subprocess.Popen([*cmd, *extra, "--log-level", "critical"], env=env, stderr=subprocess.DEVNULL)


async def serve(extra: list[str]) -> dict[str, Any]:
    import httpx

    from judger.testing.servers import free_port

    with tempfile.TemporaryDirectory() as folder:
        cfg = Path(folder) / "hung_served.py"
        cfg.write_text(CONFIG)
        port = free_port()
        proc = _serve(cfg, port, extra)
        url = f"http://127.0.0.1:{port}"
        try:
            async with httpx.AsyncClient(base_url=url, timeout=600) as client:
                while True:
                    try:
                        if (await client.get("/health")).status_code == 200:
                            break
                    except httpx.TransportError:
                        await asyncio.sleep(0.2)
                started = time.monotonic()
                hung = [client.post("/reward", json={"response": "hang", "label": "1"}) for _ in range(80)]
                tasks = [asyncio.create_task(h) for h in hung]
                await asyncio.sleep(1.0)
                good = await asyncio.gather(
                    *(client.post("/reward", json={"response": "1", "label": "1"}) for _ in range(20))
                )
                served_s = time.monotonic() - started
                replies = await asyncio.gather(*tasks)
        finally:
            proc.terminate()
            proc.wait(30)
    return {
        "hung": dict(Counter(r.status_code for r in replies)),
        "ordinary": dict(Counter(r.status_code for r in good)),
        "last_ordinary_s": served_s,
    }


def library_apart(execution: str) -> dict[str, Any]:
    """:func:`library` in a process of its own: threads left spinning would slow what comes after."""
    code = f"import asyncio, json, os, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
    code += "from bench_hung_handlers import library; "
    code += f"print(json.dumps(asyncio.run(library({execution!r}))), flush=True); os._exit(0)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=True
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--no-serve", action="store_true")
    args = parser.parse_args()
    head = [
        "library: handler",
        "trivial batch before",
        "after 4 hung calls",
        "after / before",
        "CPU idle 2 s",
    ]
    print("| " + " | ".join(head) + " |\n" + "|---" * len(head) + "|")
    for execution in ("thread", "auto"):
        r = library_apart(execution)
        before, after = r["before"], r["after"]
        where = f"`execution={execution!r}` ({r['where']})"
        figures = (
            f"{before * 1e3:.1f} ms | {after * 1e3:.1f} ms | {after / before:.2f}x | {r['idle_cpu']:.2f} s"
        )
        print(f"| {where} | {figures} |")
    if args.no_serve:
        return
    print("\n| judger serve, timeout=2 | 80 hung requests | 20 ordinary ones | last ordinary answered |")
    print("|---|---|---|---|")
    for extra, name in (
        ([], "default (worker processes)"),
        (["--set", "execution=thread"], "execution=thread"),
    ):
        r = await serve(extra)
        print(f"| {name} | {r['hung']} | {r['ordinary']} | {r['last_ordinary_s']:.1f} s |")


if __name__ == "__main__":
    asyncio.run(main())
    os._exit(0)  # the threads still spinning in the library part would keep the interpreter alive
