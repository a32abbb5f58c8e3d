"""The same harness without bubblewrap (``isolation="none-unsafe"``): formats score, verdicts still
come from outside the program, and nothing is left in the host's temp directory."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from judger.runtime.sandbox.runner import SandboxLimits
from judger.scorers.code import score_async

pytestmark = pytest.mark.py310

UNSAFE = SandboxLimits(wall_s=3.0, cpu_s=3.0, memory_mb=512, isolation="none-unsafe")


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


@pytest.mark.parametrize(
    ("program", "tests", "score"),
    [
        ("print(sum(map(int, input().split())))", {"inputs": ["1 2", "3 4"], "outputs": ["3", "7"]}, 1.0),
        ("print(0)", {"inputs": ["1 2", "3 4"], "outputs": ["3", "7"]}, 0.0),
        ("def f(a, b):\n    return a + b", {"inputs": [[1, 2]], "outputs": [3], "fn_name": "f"}, 1.0),
        (
            "def g(x):\n    return x * x",
            {"test": "def check(f):\n    assert f(3) == 9", "entry_point": "g"},
            1.0,
        ),
        (
            "class A:\n    def __eq__(self, o):\n        return True\ndef g(x):\n    return A()",
            {"test": "def check(f):\n    assert f(3) == 9", "entry_point": "g"},
            0.0,
        ),
        (
            "import builtins\nbuiltins.exec = lambda *a: None\n"
            "def check(f):\n    pass\ndef g(x):\n    return 0",
            {"test": "def check(f):\n    assert f(3) == 9", "entry_point": "g"},
            0.0,
        ),
    ],
    ids=["stdin", "stdin-wrong", "call", "assert", "assert-eq-forgery", "assert-exec-forgery"],
)
async def test_the_weaker_mode_runs_the_same_harness(
    program: str, tests: dict, score: float, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the host-side scratch goes here
    out = await score_async(fenced(program), tests, limits=UNSAFE)
    assert out["score"] == score, out
    assert out["network"] == "audit"
    assert list(tmp_path.iterdir()) == []  # and is removed


async def test_a_sandbox_that_cannot_start_is_a_judge_failure_not_a_score(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from judger import CodeJudgerConfig, RolloutState, Status
    from judger.runtime.sandbox import bwrap

    if bwrap.probe():
        pytest.skip("bubblewrap unavailable")
    judger = CodeJudgerConfig(wall_s=3).build()
    real = bwrap.command
    monkeypatch.setattr(bwrap, "command", lambda **kw: [real(**kw)[0], "--no-such-option", *real(**kw)[1:]])
    state = RolloutState(
        response=fenced("print(1)"), reward_model={"ground_truth": {"inputs": [""], "outputs": ["1"]}}
    )
    (out,) = await judger.batch_judge([state])
    assert out.status == Status.FAILED
    assert "failed to start" in (out.error_msg or "")


@pytest.mark.parametrize("isolation", ["bwrap", "none-unsafe"])
async def test_limits_that_cannot_be_applied_are_a_judge_failure_not_a_score(
    isolation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the worker's no-new-process filter refused by the kernel (an invalid program here): every
    # sample would "crash" and score 0, so it must fail as the judge's fault instead
    from judger import CodeJudgerConfig, RolloutState, Status
    from judger.runtime.sandbox import bwrap, runner

    if isolation == "bwrap" and bwrap.probe():
        pytest.skip("bubblewrap unavailable")
    monkeypatch.setattr(runner, "_fork_filter_hex", lambda: "00" * 8)
    judger = CodeJudgerConfig(wall_s=3, isolation=isolation).build()
    state = RolloutState(
        response=fenced("print(1)"), reward_model={"ground_truth": {"inputs": [""], "outputs": ["1"]}}
    )
    (out,) = await judger.batch_judge([state])
    assert out.status == Status.FAILED, out.reward
    assert "could not confine the program" in (out.error_msg or "")
    assert "process filter" in (out.error_msg or "")


async def test_an_interpreter_under_tmp_runs_in_the_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a CI clone or a venv in a temp dir lives under /tmp, where the sandbox mounts its scratch: the
    # install is bound elsewhere, so the program runs and its scratch still holds only its own files
    import os
    import subprocess
    import sys

    venv = tmp_path / "venv"
    # made from the base interpreter, as a CI machine's venv is (a venv made from inside another
    # venv links to that venv's python, which the sandbox does not mount)
    base = os.path.realpath(sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True)
    assert str(venv).startswith("/tmp/")
    monkeypatch.setattr(sys, "executable", str(venv / "bin" / "python"))
    monkeypatch.setattr(sys, "prefix", str(venv))
    tests = {"inputs": [""], "outputs": ["['a.txt']"]}
    program = "import os\nopen('a.txt', 'w').write('x')\nprint(sorted(os.listdir('.')))"
    result = await score_async(fenced(program), tests, limits=SandboxLimits(wall_s=5.0, cpu_s=5.0))
    assert result["score"] == 1.0, result


@pytest.mark.parametrize("isolation", ["bwrap", "none-unsafe"])
def test_a_finished_sandbox_leaves_no_pipe_for_a_finalizer(isolation: str) -> None:
    # Python 3.10: a sandbox's stdout left open (the first test failed, the rest were skipped) was
    # closed by the transport's finalizer after asyncio.run had closed the loop, which reported
    # "Event loop is closed" as an unraisable exception in whatever ran next
    import asyncio
    import gc
    import sys

    from judger.runtime.sandbox import bwrap

    if isolation == "bwrap" and bwrap.probe():
        pytest.skip("bubblewrap unavailable")
    limits = SandboxLimits(wall_s=3.0, cpu_s=3.0, memory_mb=512, isolation=isolation)  # type: ignore[arg-type]
    tests = {"inputs": ["1", "2", "3"], "outputs": ["x", "y", "z"]}
    seen: list[object] = []
    hook = sys.unraisablehook
    sys.unraisablehook = seen.append
    try:
        for _ in range(3):
            out = asyncio.run(score_async(fenced("print('a' * 100000)"), tests, limits=limits))
            assert out["score"] == 0.0
        gc.collect()
    finally:
        sys.unraisablehook = hook
    assert seen == []
