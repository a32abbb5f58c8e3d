"""The SandboxFusion backend of the code judger, against an honest fake of ``POST /run_code``."""

from __future__ import annotations

import pytest

from judger import CodeJudgerConfig, RolloutState, Status
from judger.runtime.sandbox import bwrap
from judger.testing import serve_asgi
from judger.testing.fake_sandbox_fusion import FakeSandboxFusion

pytestmark = [
    pytest.mark.skipif(bool(bwrap.probe()), reason="the fake runs programs under bubblewrap"),
    pytest.mark.py310,
]

ADD = {"inputs": ["1 2", "3 4"], "outputs": ["3", "7"]}
CALL = {"inputs": [[1, 2], [3, 4]], "outputs": [3, 7], "fn_name": "add"}
ASSERT = {"test": "def check(f):\n    assert f(2) == 4", "entry_point": "sq"}


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def state(code: str, tests: dict) -> RolloutState:
    return RolloutState(response=fenced(code), reward_model={"ground_truth": tests})


async def test_every_test_format_scores_through_run_code() -> None:
    fake = FakeSandboxFusion()
    with serve_asgi(fake.app) as server:
        judger = CodeJudgerConfig(backend="sandbox_fusion", sandbox_fusion_url=server.url, wall_s=2).build()
        states = [
            state("a, b = map(int, input().split())\nprint(a + b)", ADD),
            state("a, b = map(int, input().split())\nprint(a - b)", ADD),
            state("def add(a, b):\n    return a + b", CALL),
            state("def add(a, b):\n    print('noise')\n    return a + b if a < 3 else 0", CALL),
            state("def sq(x):\n    return x * x", ASSERT),
            state("def sq(x):\n    return x + x + 1", ASSERT),
            state("import time\ntime.sleep(30)", {"inputs": ["1"], "outputs": ["1"]}),
        ]
        out = await judger.batch_judge(states)
    scores = [s.reward["score"] if s.reward else None for s in out]
    assert scores == [1.0, 0.0, 1.0, 0.5, 1.0, 0.0, 0.0]
    assert out[6].reward["error"].startswith("timeout")  # type: ignore[index]
    assert len(fake.requests) >= 10 and all(r["language"] == "python" for r in fake.requests)
    assert fake.requests[0]["stdin"] == "1 2" and fake.requests[0]["run_timeout"] == 2


async def test_a_server_failure_fails_the_sample_not_scores_it() -> None:
    fake = FakeSandboxFusion()
    fake.mode = "error500"
    with serve_asgi(fake.app) as server:
        judger = CodeJudgerConfig(backend="sandbox_fusion", sandbox_fusion_url=server.url).build()
        (out,) = await judger.batch_judge([state("print(3)", ADD)])
    assert out.status == Status.FAILED and "HTTP 500" in (out.error_msg or "")
    judger = CodeJudgerConfig(backend="sandbox_fusion", sandbox_fusion_url="http://127.0.0.1:9").build()
    (out,) = await judger.batch_judge([state("print(3)", ADD)])
    assert out.status == Status.FAILED and "unreachable" in (out.error_msg or "")


def test_the_backend_needs_its_url() -> None:
    with pytest.raises(ValueError, match="sandbox_fusion_url"):
        CodeJudgerConfig(backend="sandbox_fusion")
    with pytest.raises(ValueError, match="backend='sandbox_fusion'"):
        CodeJudgerConfig(sandbox_fusion_url="http://127.0.0.1:8080")


async def test_an_exit_before_the_assert_tests_run_scores_zero() -> None:
    # exit status 0 is the program's to give: SandboxFusion reports a run that exits 0 before its
    # tests as finished, which alone would read as every assert passing
    fake = FakeSandboxFusion()
    programs = [
        "def sq(x):\n    return x * x",  # the honest control
        "import sys\nsys.exit(0)",
        "import os\nos._exit(0)",
        "def sq(x):\n    return 0\nraise SystemExit",
        "import sys, os\nsys.excepthook = lambda *a: os._exit(0)\ndef sq(x):\n    return 0",
    ]
    with serve_asgi(fake.app) as server:
        judger = CodeJudgerConfig(backend="sandbox_fusion", sandbox_fusion_url=server.url, wall_s=2).build()
        out = await judger.batch_judge([state(p, ASSERT) for p in programs])
    assert [s.reward["score"] if s.reward else None for s in out] == [1.0, 0.0, 0.0, 0.0, 0.0]
    for s in out[1:4]:
        assert "ended with status 0 before the tests finished" in s.reward["error"]  # type: ignore[index]
