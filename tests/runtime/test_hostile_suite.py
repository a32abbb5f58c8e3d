"""The hostile-program catalogue (``hostile_programs.py``) against the code judger, as root.

Every program scores 0 (none is a judge failure either: a FAILED sample would be the program
changing how it is judged), the honest controls in the same batch score 1.0, the host's device
nodes keep their modes, no process of any sample is left, and the judger keeps working.
"""

from __future__ import annotations

import os
from collections import Counter

import httpx
import pytest

from judger import CodeJudgerConfig, RolloutState, Status
from judger.runtime.sandbox import bwrap
from judger.testing.processes import sandbox_processes_after

from .hostile_programs import CATALOGUE, HONEST_ASSERT, HONEST_STDIN, Hostile

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
