"""The hostile-program catalogue (``hostile_programs.py``) against the code judger, as root.

Every program scores 0 (none is a judge failure either: a FAILED sample would be the program
changing how it is judged), the honest controls in the same batch score 1.0, the host's device
nodes keep their modes, no process of any sample is left, and the judger keeps working.

The machine-wide attacks run one at a time beside their honest sibling while a thread watches the
host's own counter of what each takes (TCP memory, the AIO quota, the huge page pool, the pty pool,
the descriptors a sandbox holds, its scratch's inodes, the judge's memory and event loop): bounded
while the sample runs, back where it was after, with no cgroup folder, uid lease or pidfd left.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import threading
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from judger import CodeJudgerConfig, RolloutState, Status
from judger.runtime.sandbox import bwrap, cgroups, uids
from judger.testing.hostile_openai import PeakRSS
from judger.testing.processes import sandbox_processes, sandbox_processes_after

from .hostile_programs import (
    CATALOGUE,
    FLOOD_MB,
    HONEST_ASSERT,
    HONEST_STDIN,
    MACHINE_WIDE,
    SIBLINGS,
    Hostile,
)

pytestmark = [
    pytest.mark.skipif(bool(bwrap.probe()), reason=f"bubblewrap unavailable: {bwrap.probe()}"),
    pytest.mark.slow,
    pytest.mark.py310,
]


def _state(program: Hostile) -> RolloutState:
    return RolloutState(response=program.response, reward_model={"ground_truth": program.tests})


def test_the_catalogue_is_at_least_forty_programs_across_the_categories() -> None:
    categories = Counter(program.category for program in CATALOGUE)
    assert len(CATALOGUE) >= 40 and len(categories) >= 8, categories
    assert len({program.name for program in CATALOGUE}) == len(CATALOGUE)


async def test_every_hostile_program_scores_zero_beside_honest_controls() -> None:
    devices = {name: os.stat(f"/dev/{name}").st_mode for name in ("null", "zero", "full", "urandom")}
    judger = CodeJudgerConfig(wall_s=3, cpu_s=3, memory_mb=256).build()
    programs = [HONEST_STDIN, *CATALOGUE, HONEST_ASSERT]
    states = await judger.batch_judge([_state(p) for p in programs])
    verdicts = {
        p.name: (s.status == Status.FAILED, None if s.reward is None else s.reward["score"], s.error_msg)
        for p, s in zip(programs, states)
    }
    wrong = {
        name: verdict
        for name, verdict in verdicts.items()
        if verdict[:2] != (False, 1.0 if name.startswith("honest") else 0.0)
    }
    assert wrong == {}
    assert {name: os.stat(f"/dev/{name}").st_mode for name in devices} == devices
    assert sandbox_processes_after(5.0) == []
    (after,) = await judger.batch_judge([_state(HONEST_STDIN)])
    assert after.reward is not None and after.reward["score"] == 1.0


def test_the_verdict_attacks_score_zero_through_the_server() -> None:
    from judger.server.app import create_app
    from judger.testing import serve_asgi

    chosen = [p for p in CATALOGUE if p.category in ("forged-report", "pid-1", "assert-harness")]
    with serve_asgi(create_app(CodeJudgerConfig(wall_s=3, cpu_s=3))) as server:
        for program in [HONEST_STDIN, *chosen, HONEST_ASSERT]:
            reply = httpx.post(
                server.url + "/reward",
                json={"response": program.response, "label": program.tests},
                timeout=60,
            )
            want = 1.0 if program.name.startswith("honest") else 0.0
            assert reply.status_code == 200 and reply.json()["score"] == want, (program.name, reply.text)
        assert httpx.get(server.url + "/health", timeout=5).status_code == 200


# --- what the kernel keeps per machine ------------------------------------------------------------

MiB = 1 << 20
PAGE = os.sysconf("SC_PAGE_SIZE")
# each attack beside its sibling: wall_s above the judger's timeout, so that a program that holds
# on is stopped by its sample's budget (4.5 s), and its sandbox's teardown comes after that
CONFIG = CodeJudgerConfig(wall_s=10, cpu_s=10, timeout=5, processes=16, output_mb=FLOOD_MB)


def _read(path: str) -> str:
    return Path(path).read_text()


def _tcp_bytes() -> int:
    """The machine's TCP buffer memory (one counter for every network namespace)."""
    found = re.search(r"^TCP:.* mem (\d+)", _read("/proc/net/sockstat"), re.MULTILINE)
    return int(found.group(1)) * PAGE if found else 0


def _meminfo(field: str) -> int:
    found = re.search(rf"^{field}:\s+(\d+)", _read("/proc/meminfo"), re.MULTILINE)
    return int(found.group(1)) if found else 0


def _huge_pages_free() -> int:
    return _meminfo("HugePages_Free") - _meminfo("HugePages_Rsvd")


def _sandbox_sockets() -> int:
    """Distinct sockets in the descriptor tables of every task of this process's sandboxes."""
    found: set[str] = set()
    for pid in sandbox_processes():
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{pid}/task"):
                with contextlib.suppress(OSError):
                    for fd in os.listdir(f"/proc/{pid}/task/{task}/fd"):
                        with contextlib.suppress(OSError):
                            target = os.readlink(f"/proc/{pid}/task/{task}/fd/{fd}")
                            if target.startswith("socket:"):
                                found.add(target)
    return len(found)


def _scratch_inodes() -> int:
    """The inodes in use in the scratch of any of this process's sandboxes (seen through the root
    of a process running under a sandbox uid: bubblewrap's own first stage sees the host's /tmp)."""
    used = 0
    for pid in sandbox_processes():
        with contextlib.suppress(OSError):
            if os.stat(f"/proc/{pid}").st_uid >= uids.FIRST_UID:
                fs = os.statvfs(f"/proc/{pid}/root/tmp")
                used = max(used, fs.f_files - fs.f_ffree)
    return used


# attack -> (the host's counter, the most it may grow while the sample runs, what it measures)
COUNTERS: dict[str, tuple[Callable[[], int], int, str]] = {
    "tcp-buffers": (_tcp_bytes, 64 * MiB, "bytes of TCP buffers on the machine"),
    "aio-quota": (lambda: int(_read("/proc/sys/fs/aio-nr")), 1024, "AIO events on the machine"),
    "huge-pages": (lambda: -_huge_pages_free(), 0, "huge pages taken from the pool"),
    "pty-pool": (lambda: int(_read("/proc/sys/kernel/pty/nr")), 8, "ptys on the machine"),
    "threads-own-fd-tables": (_sandbox_sockets, CONFIG.limits().open_files + 16, "sockets the sandbox holds"),
    "inode-flood": (_scratch_inodes, CONFIG.scratch_inodes, "inodes in the scratch"),
}


class Watch:
    """Samples ``counter`` every 20 ms while the block runs: ``peak - before`` is its growth."""

    def __init__(self, counter: Callable[[], int]) -> None:
        self.counter = counter
        self.before = self.peak = counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.counter())
            time.sleep(0.02)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _own_folders() -> list[str]:
    """This process's sandbox cgroup folders (other judges on the machine share the hierarchy)."""
    layout = cgroups._layout()
    if isinstance(layout, str):
        return []
    prefix = f"s-{os.getpid()}-"
    return [
        name
        for parent in (layout.pids, layout.memory)
        if parent is not None
        for name in os.listdir(parent)
        if name.startswith(prefix)
    ]


def _held() -> list[str]:
    """What this process holds for sandboxes: pidfds and uid leases."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target == "anon_inode:[pidfd]" or "judger-sandbox-uids" in target:
                found.append(target)
    return sorted(found)


def _left_behind(held: list[str], timeout: float = 10.0) -> dict[str, object]:
    """What of the samples is still around once ``timeout`` has passed or nothing is."""
    deadline = time.monotonic() + timeout
    while True:
        left = {"folders": _own_folders(), "held": sorted(set(_held()) - set(held))}
        left["processes"] = sandbox_processes()
        if not any(left.values()) or time.monotonic() > deadline:
            return {k: v for k, v in left.items() if v}
        time.sleep(0.05)


@pytest.fixture
def huge_page_pool() -> Iterator[int]:
    """Two huge pages reserved for the test where the machine has none (restored after)."""
    path = Path("/proc/sys/vm/nr_hugepages")
    before = int(path.read_text())
    if before == 0:
        with contextlib.suppress(OSError):
            path.write_text("2")
    try:
        yield _huge_pages_free()
    finally:
        if before == 0:
            with contextlib.suppress(OSError):
                path.write_text("0")


def _verdicts(programs: list[Hostile], states: list[RolloutState]) -> dict[str, object]:
    return {
        p.name: (s.status.name, None if s.reward is None else s.reward["score"], s.error_msg or s.reward)
        for p, s in zip(programs, states)
    }


def _scored(programs: list[Hostile], states: list[RolloutState]) -> None:
    """The honest sibling scores 1.0 and the attack 0.0, neither a judge failure."""
    verdicts = _verdicts(programs, states)
    wanted = [1.0 if p.category == "control" else 0.0 for p in programs]
    got = [(s.status != Status.FAILED, s.reward and s.reward["score"]) for s in states]
    assert got == [(True, w) for w in wanted], verdicts


@pytest.mark.serial  # reads counters of the whole machine
@pytest.mark.parametrize("attack", [p for p in MACHINE_WIDE if p.name in COUNTERS], ids=lambda p: p.name)
async def test_a_machine_wide_resource_stays_within_its_sample(
    attack: Hostile, request: pytest.FixtureRequest
) -> None:
    counter, bound, what = COUNTERS[attack.name]
    if attack.name == "huge-pages" and request.getfixturevalue("huge_page_pool") == 0:
        pytest.skip("no huge page pool could be reserved here")
    if attack.name == "inode-flood" and not bwrap.drops_to_own_uid():
        pytest.skip("the scratch is bounded in inodes where the judge runs as root")
    judger = CONFIG.build()
    programs = [SIBLINGS[attack.name], attack]
    held = _held()
    with Watch(counter) as watch:
        states = await judger.batch_judge([_state(p) for p in programs])
    _scored(programs, states)
    assert watch.peak - watch.before <= bound, f"{watch.peak - watch.before} {what} while the sample ran"
    assert _left_behind(held) == {}
    assert counter() - watch.before <= bound, f"{counter() - watch.before} {what} after the sample"


@pytest.mark.serial  # bounds the event loop's stall
async def test_output_is_compared_without_amplifying_it_in_the_judge() -> None:
    # three tests, each the output limit of invalid UTF-8: decoded, they grew the judge by 6x the
    # limit and stalled its event loop 0.8 s (4 s at 64 MiB)
    (attack,) = [p for p in MACHINE_WIDE if p.name == "invalid-utf8-flood"]
    programs = [SIBLINGS[attack.name], attack]
    judger = CONFIG.build()
    await judger.batch_judge([_state(HONEST_STDIN)])  # imports and the first sandbox, before measuring
    lag, stop = 0.0, asyncio.Event()

    async def ticker() -> None:
        nonlocal lag
        last = time.monotonic()
        while not stop.is_set():
            await asyncio.sleep(0.01)
            now = time.monotonic()
            lag, last = max(lag, now - last - 0.01), now

    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tick = asyncio.ensure_future(ticker())
        with PeakRSS() as rss:
            states = await judger.batch_judge([_state(p) for p in programs])
        stop.set()
        await tick
        peak = (tracemalloc.get_traced_memory()[1] - base) / MiB
    finally:
        tracemalloc.stop()
    _scored(programs, states)
    assert peak <= 2.5 * FLOOD_MB, f"the judge built {peak:.0f} MiB (RSS +{rss.growth / MiB:.0f} MiB)"
    assert lag < 0.5, f"the event loop stalled {lag:.2f} s"
