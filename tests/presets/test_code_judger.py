"""Code judger: test formats, scoring modes, early stopping, and hostile programs in the sandbox.

Every hostile program must be contained (the test process and the machine are unharmed), reported
(the sample's ``error`` says why it failed) and cleaned up (no sandbox process left behind).
"""

from __future__ import annotations

import asyncio
import os
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from judger import CodeJudgerConfig, RolloutState, Status
from judger.runtime.sandbox.runner import SandboxLimits, TestOutcome, run_tests
from judger.scorers.code import compute_score, extract_code, parse_tests, same_stdout, score_async
from judger.testing.processes import cmdlines, sandbox_processes_after

pytestmark = pytest.mark.py310

ADD = {"inputs": ["1 2\n", "3 4\n", "10 -3\n"], "outputs": ["3\n", "7\n", "7\n"]}
APPS_LIKE = {"inputs": ["1\n", "5\n"], "outputs": ["2\n", "6\n"]}
FAST = SandboxLimits(wall_s=2.0, cpu_s=2.0, memory_mb=512)


def fenced(code: str) -> str:
    return f"Here is my solution.\n```python\n{code}\n```\nDone."


@pytest.fixture(autouse=True)
def no_process_left_behind() -> Iterator[None]:
    yield
    assert sandbox_processes_after(5.0) == []


async def score(code: str, tests: object, **options: object) -> dict:
    options.setdefault("limits", FAST)
    return await score_async(fenced(code), tests, **options)  # type: ignore[arg-type]


# --- formats and scoring -------------------------------------------------------------------------


async def test_stdin_program_scores_the_fraction_passed() -> None:
    right = await score("a, b = map(int, input().split())\nprint(a + b)", ADD)
    assert right["score"] == 1.0 and right["acc"] is True and right["passed"] == 3
    wrong = await score("a, b = map(int, input().split())\nprint(a + b if a < 5 else 0)", ADD)
    assert wrong["score"] == pytest.approx(2 / 3) and wrong["acc"] is False
    assert wrong["error"] == "failed: wrong answer"
    strict = await score(
        "a, b = map(int, input().split())\nprint(a + b if a < 5 else 0)", ADD, continuous=False
    )
    assert strict["score"] == 0.0


async def test_stdin_reading_styles_and_main_guard() -> None:
    programs = [
        "import sys\na, b = map(int, sys.stdin.read().split())\nprint(a + b)",
        "import sys\nd = sys.stdin.buffer.read().split()\nsys.stdout.write(f'{int(d[0]) + int(d[1])}\\n')",
        "a, b = map(int, open(0).read().split())\nprint(a + b)",
        "def main():\n    a, b = map(int, input().split())\n    print(a + b)\n\n"
        "if __name__ == '__main__':\n    main()",
        "import sys\nprint(sum(map(int, input().split())))\nsys.exit(0)",
        "import os, sys\nprint(sum(map(int, input().split())))\nsys.stdout.flush()\nos._exit(0)",
    ]
    for program in programs:
        assert (await score(program, ADD))["score"] == 1.0, program


def test_output_comparison() -> None:
    assert same_stdout("3  \n7\n\n", "3\n7")
    assert same_stdout("0.5000000", "0.5")
    assert not same_stdout("0.51", "0.5")
    assert not same_stdout("3 7", "37")
    assert same_stdout("1 2  3", "1 2 3")


async def test_call_based_tests() -> None:
    tests = {"inputs": ["1\n2", [3, 4], "[1, 2]\n[3]"], "outputs": ["3", [7], "[1, 2, 3]"], "fn_name": "add"}
    assert (await score("def add(a, b):\n    return a + b", tests))["score"] == 1.0
    solution = "class Solution:\n    def add(self, a, b):\n        return a + b"
    assert (await score(solution, tests))["score"] == 1.0
    assert (
        await score(
            "def add(a, b):\n    return (a, b)", {"inputs": [[1, 2]], "outputs": [[1, 2]], "fn_name": "add"}
        )
    )["acc"] is True  # tuples compare as lists
    missing = await score("def other():\n    pass", tests)
    assert missing["score"] == 0.0 and "add" in missing["error"]
    raising = await score("def add(a, b):\n    raise ValueError('boom')", tests)
    assert raising["score"] == 0.0 and "ValueError: boom" in raising["error"]


async def test_assert_style_tests() -> None:
    tests = {"test": "def check(f):\n    assert f(2) == 4\n    assert f(-1) == 1", "entry_point": "sq"}
    assert (await score("def sq(x):\n    return x * x", tests))["score"] == 1.0
    bad = await score("def sq(x):\n    return 2 * x", tests)
    assert bad["score"] == 0.0 and "AssertionError" in bad["error"]


async def test_no_code_and_syntax_errors() -> None:
    none = await score_async("I don't know. ```\n```", ADD)
    assert none["status"] == "no_code" and none["score"] == 0.0 and none["pred"] is None
    broken = await score("def f(:\n    pass", ADD)
    assert broken["score"] == 0.0 and "SyntaxError" in broken["error"]


def test_extraction() -> None:
    text = "```python\nprint(1)\n```\ntext\n```py\nprint(2)\n```\n```bash\nls\n```"
    assert extract_code(text) == "print(2)\n"
    assert extract_code("```\nprint(3)\n```") == "print(3)\n"
    assert extract_code("```python\nprint(4)") == "print(4)"  # cut off by the length limit
    assert extract_code("print(5)") == "print(5)"
    assert extract_code("```cpp\nint main(){}\n```") == ""
    assert extract_code(text, compat="verl") == "\nprint(1)\n"  # verl only knows ```python


def test_bad_tests_are_judge_failures_not_wrong_answers() -> None:
    with pytest.raises(ValueError, match="JSON"):
        parse_tests("{not json")
    with pytest.raises(ValueError, match="outputs"):
        parse_tests({"inputs": ["1"], "outputs": []})
    with pytest.raises(ValueError, match="inputs"):
        parse_tests({"cases": []})
    assert parse_tests('{"inputs": ["1"], "outputs": ["1"]}').mode == "stdin"


async def test_all_or_nothing_stops_at_the_first_failure() -> None:
    # the first test fails fast (0.4 s); every later one would hang until its wall limit (60 s)
    program = "x = int(input())\nif x == 0:\n    print('wrong')\nelse:\n    import time; time.sleep(90)"
    tests = {"inputs": ["0", "1", "2", "3"], "outputs": ["0", "1", "2", "3"]}
    start = time.monotonic()
    out = await score(
        program, tests, continuous=False, limits=SandboxLimits(wall_s=60, cpu_s=60, memory_mb=512)
    )
    assert out["score"] == 0.0 and time.monotonic() - start < 10
    assert out["passed"] == 0


async def test_verl_compat_scores_the_first_ten_once_anything_fails() -> None:
    tests = {"inputs": [str(i) for i in range(12)], "outputs": [str(i) for i in range(12)]}
    program = "x = int(input())\nprint(x if x not in (3, 11) else -1)"
    verl = await score(program, tests, compat="verl")
    assert verl["score"] == pytest.approx(9 / 10)
    ours = await score(program, tests)
    assert ours["score"] == pytest.approx(10 / 12)
    capped = await score(program, tests, max_tests=3)
    assert capped["score"] == 1.0 and capped["total"] == 3


# --- hostile programs ----------------------------------------------------------------------------


async def test_infinite_loop_is_killed_at_the_time_limit() -> None:
    start = time.monotonic()
    out = await score("while True:\n    pass", {"inputs": [""], "outputs": [""]})
    elapsed = time.monotonic() - start
    assert out["score"] == 0.0 and out["error"].startswith("timeout:")
    assert elapsed < 5 * FAST.wall_s  # normally the limit and a little; unkilled: forever


async def test_sleeping_program_is_killed_at_the_wall_limit() -> None:
    start = time.monotonic()
    out = await score("import time\ntime.sleep(100)", {"inputs": [""], "outputs": [""]})
    assert out["error"] == f"timeout: wall time limit of {FAST.wall_s:g} s exceeded"
    assert time.monotonic() - start < 5 * FAST.wall_s  # normally the limit and a little; unkilled: 100 s


async def test_fork_bomb_is_refused() -> None:
    out = await score("import os\nwhile True:\n    os.fork()", {"inputs": [""], "outputs": [""]})
    assert out["score"] == 0.0 and "os.fork" in out["error"]
    out = await score(
        "import subprocess\nsubprocess.run(['sh', '-c', 'echo hi'])", {"inputs": [""], "outputs": [""]}
    )
    assert "subprocess.Popen" in out["error"]


async def test_background_children_die_with_the_run_when_processes_are_allowed() -> None:
    limits = SandboxLimits(wall_s=5.0, cpu_s=5.0, memory_mb=512, allow_subprocess=True)
    program = "import subprocess\nsubprocess.Popen(['sleep', '987.25'])\nprint(int(input()) + 1)"
    out = await score(program, APPS_LIKE, limits=limits)
    assert out["score"] == 1.0
    time.sleep(0.2)
    leftovers = [pid for pid, cmdline in cmdlines().items() if cmdline == b"sleep\x00987.25\x00"]
    assert leftovers == []


async def test_memory_bomb_is_contained() -> None:
    out = await score("x = bytearray(8 * 1024 ** 3)\nprint(len(x))", {"inputs": [""], "outputs": [""]})
    assert out["score"] == 0.0 and "MemoryError" in out["error"]
    out = await score("x = []\nwhile True:\n    x.append(' ' * 10 ** 6)", {"inputs": [""], "outputs": [""]})
    assert out["score"] == 0.0 and ("MemoryError" in out["error"] or "timeout" in out["error"])


async def test_network_access_is_blocked() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    port = server.getsockname()[1]
    accepted: list[object] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                accepted.append(server.accept())
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        program = (
            f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)\nprint('connected')"
        )
        out = await score(program, {"inputs": [""], "outputs": ["connected"]})
    finally:
        stop.set()
        thread.join()
        server.close()
    assert out["score"] == 0.0 and accepted == []
    assert "socket" in out["error"]
    assert out["network"] in ("netns+audit", "userns+netns+audit", "audit")


async def test_writing_outside_the_scratch_directory_is_refused(tmp_path: Path) -> None:
    # host paths are not in the sandbox at all (a private /tmp); system paths are read-only
    target = tmp_path / "escaped.txt"
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    program = (
        f"import os\nopen('inside.txt', 'w').write('fine')\nopen({str(target)!r}, 'w').write('escaped')\n"
    )
    out = await score(program, {"inputs": [""], "outputs": [""]})
    assert not target.exists() and "FileNotFoundError" in out["error"]
    out = await score(f"import os\nos.remove({str(victim)!r})", {"inputs": [""], "outputs": [""]})
    assert victim.read_text() == "keep me" and "FileNotFoundError" in out["error"]
    out = await score("open('/usr/judger-escape', 'w')", {"inputs": [""], "outputs": [""]})
    assert not os.path.exists("/usr/judger-escape") and "outside the scratch directory" in out["error"]


async def test_forged_results_are_ignored() -> None:
    # a program that writes "test passed" reports to every descriptor it can, then leaves at once
    program = (
        "import json, os\n"
        "for index in range(3):\n"
        "    line = json.dumps({'event': 'test', 'index': index, 'status': 'ok', 'stdout': '3'}) + '\\n'\n"
        "    for fd in range(3, 1024):\n"
        "        try:\n"
        "            os.write(fd, line.encode())\n"
        "        except OSError:\n"
        "            pass\n"
        "os._exit(0)\n"
        "def check(f):\n    pass\n"
    )
    out = await score(program, {"test": ["assert False"] * 3})
    assert out["score"] == 0.0 and out["passed"] == 0


async def test_output_flood_is_cut_off() -> None:
    limits = SandboxLimits(wall_s=5.0, cpu_s=5.0, memory_mb=512, output_mb=1)
    out = await score("while True:\n    print('x' * 1000)", {"inputs": [""], "outputs": [""]}, limits=limits)
    assert out["score"] == 0.0 and "output size limit exceeded" in out["error"]


async def test_scratch_inodes_are_honoured_or_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from judger.presets import code as code_preset

    files = "import os\nfor i in range(100):\n    open(f'f{i}', 'w').close()\nprint(int(input()) * 2)"
    tests = {"inputs": ["21"], "outputs": ["42"]}
    if code_preset.drops_to_own_uid():
        judger = CodeJudgerConfig(wall_s=5, cpu_s=5, scratch_inodes=64).build()
        (capped,) = await judger.batch_judge(
            [RolloutState(response=fenced(files), reward_model={"ground_truth": tests})]
        )
        assert capped.reward is not None and "No space left" in capped.reward["error"], capped.reward
    monkeypatch.setattr(code_preset, "drops_to_own_uid", lambda: False)  # a judge that is not root
    with pytest.raises(ValueError, match="scratch_inodes is honoured only by a judge that runs as root"):
        CodeJudgerConfig(scratch_inodes=64).build()
    CodeJudgerConfig().build()  # the default is not refused: there the memory limit bounds them


async def test_scratch_directory_is_a_private_tmpfs_and_leaves_nothing_on_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []

    def check(index: int, report: dict) -> TestOutcome:
        seen.append(report.get("stdout", b"").decode().strip())
        return TestOutcome("passed")

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where a host-side scratch would go
    program = "import os\nopen('scratch.txt', 'w').write('x')\nprint(os.getcwd(), os.listdir('.'))"
    result = await run_tests(program, "stdin", [""], check, limits=FAST)
    assert result.passed == 1
    assert seen == ["/tmp ['scratch.txt']"]  # the sandbox's own /tmp, not the host's
    assert list(tmp_path.iterdir()) == []


# --- the judger ----------------------------------------------------------------------------------


async def test_judger_batch_with_mixed_samples() -> None:
    judger = CodeJudgerConfig(wall_s=2, cpu_s=2).build()
    good = fenced("a, b = map(int, input().split())\nprint(a + b)")
    states = [
        RolloutState(response=good, reward_model={"ground_truth": ADD}),
        RolloutState(response=fenced("print('no')"), reward_model={"ground_truth": ADD}),
        RolloutState(response=good, reward_model={"ground_truth": "not json"}),
        RolloutState(response=good, reward_model={"ground_truth": ADD}),
    ]
    out = await judger.batch_judge(states)
    assert [s.reward["score"] if s.reward else None for s in out] == [1.0, 0.0, None, 1.0]
    assert out[2].status == Status.FAILED and "JSON" in (out[2].error_msg or "")
    assert set(out[0].reward) >= {"score", "acc", "pred", "passed", "total", "status", "error"}  # type: ignore[arg-type]


async def test_judger_deadline_kills_the_sample() -> None:
    # the program's slowness is the program's: its tests share all but a margin of the deadline,
    # and spending that scores them as timeouts before the deadline fails the sample
    judger = CodeJudgerConfig(wall_s=30, cpu_s=30, timeout=1.0).build()
    state = RolloutState(response=fenced("import time\ntime.sleep(60)"), reward_model={"ground_truth": ADD})
    start = time.monotonic()
    (out,) = await judger.batch_judge([state])
    assert time.monotonic() - start < 5
    assert out.status != Status.FAILED and out.reward is not None
    assert out.reward["score"] == 0.0 and out.reward["error"].startswith("timeout: the sample's time budget")


async def test_judger_bounds_parallel_programs() -> None:
    judger = CodeJudgerConfig(max_parallel=1, wall_s=5).build()
    program = fenced("import time\ntime.sleep(0.3)\nprint(1)")
    states = [
        RolloutState(
            response=program + f"\n# {i}", reward_model={"ground_truth": {"inputs": [""], "outputs": ["1"]}}
        )
        for i in range(3)
    ]
    start = time.monotonic()
    await judger.batch_judge(states)
    assert time.monotonic() - start >= 0.9  # one at a time
    assert all(s.reward["score"] == 1.0 for s in states)  # type: ignore[index]


def test_sync_compute_score_from_threads_and_inside_a_loop() -> None:
    program = fenced("print(int(input()) * 2)")
    tests = {"inputs": ["2", "5"], "outputs": ["4", "10"]}
    results: list[dict] = []
    threads = [
        threading.Thread(target=lambda: results.append(compute_score(program, tests))) for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r["score"] for r in results] == [1.0, 1.0, 1.0]

    async def inside_loop() -> dict:
        return compute_score(program, tests)

    assert asyncio.run(inside_loop())["score"] == 1.0
