"""Peak memory and time of the data path and a verifier under each attack of a hostile server,
with the default caps (the tests lower them to stay fast).

The hostile server (judger.testing.hostile_openai) runs in its own process, so its memory is not
counted; the client is a RolloutController with its defaults but ``request_timeout`` (one attempt
in all) and a CompassVerifierV2 judger with its defaults but ``request_timeout``.

    python bench/bench_hostile.py --request-timeout 5
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from typing import Any

from judger import CompassVerifierV2Config, RolloutState, Status
from judger.testing.hostile_openai import PeakRSS
from judger.trainer.controller import RolloutControllerConfig

MiB = 2**20
SERVER = """
import sys, time
from judger.testing.hostile_openai import HostileServer
server = HostileServer(sys.argv[1], model="policy", bomb_bytes=int(sys.argv[2]), huge_bytes=int(sys.argv[3]),
                       drip_interval=1.0, content="\\\\boxed{A}").start()
if sys.argv[1] == "gzip_bomb":
    server.bomb(1), server.bomb(2)  # made before the clock starts
print(server.port, flush=True)
time.sleep(3600)
"""
ATTACKS = ["ok", "gzip_bomb", "endless", "huge", "drip_chat", "drip_models"]


def serve(mode: str, bomb: int, huge: int) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, mode, str(bomb), str(huge)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    return proc, f"http://127.0.0.1:{proc.stdout.readline().strip()}"


async def policy(url: str, timeout: float) -> tuple[str, str]:
    config = RolloutControllerConfig(
        base_urls=[url], request_timeout=timeout, max_retries=0, models_timeout=timeout
    )
    async with config.build() as ctl:
        states = [RolloutState(message=[{"role": "user", "content": "q"}]) for _ in range(2)]
        await ctl.generate_group(states)
    return states[0].status.value, (states[0].error_msg or "")[:70]


async def grader(url: str, timeout: float) -> tuple[str, str]:
    judger = CompassVerifierV2Config(hosts=[url], request_timeout=timeout, max_retries=0).build()
    async with judger:
        state = RolloutState(
            message=[{"role": "user", "content": "q"}], response="\\boxed{1}", status=Status.COMPLETED
        )
        state = await judger.judge(state)
    return state.status.value, (state.error_msg or str(state.reward))[:70]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--request-timeout", type=float, default=5.0)
    parser.add_argument("--bomb-mib", type=int, default=1024, help="what the gzip bomb decodes to")
    parser.add_argument("--huge-mib", type=int, default=200, help="the size of the huge reply")
    args = parser.parse_args()
    print(f"{'path':8} {'attack':12} {'seconds':>8} {'peak MiB':>9}  status: reason")
    for path, run in (("policy", policy), ("grader", grader)):
        for mode in ATTACKS:
            proc, url = serve(mode, args.bomb_mib * MiB, args.huge_mib * MiB)
            try:
                with PeakRSS(every=0.002) as rss:
                    start = time.monotonic()
                    result: Any = asyncio.run(run(url, args.request_timeout))
                    took = time.monotonic() - start
            finally:
                proc.kill()
                proc.wait()
            print(f"{path:8} {mode:12} {took:8.2f} {rss.growth / MiB:9.1f}  {result[0]}: {result[1]}")


if __name__ == "__main__":
    main()
