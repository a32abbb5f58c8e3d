"""Forged code verdicts that need no escape from the sandbox.

The program stays inside every kernel boundary and still bends the verdict: names that shadow the
builtins the tests use, exceptions that steer the test's control flow, replies that cost the judge
far more to decode than to send, and slowness that turned its sample into a judge failure. Each
forgery has an honest control that scores 1.0 through the same path.
"""

from __future__ import annotations

import asyncio
import json
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from judger import CodeJudgerConfig, RolloutState, Status
from judger.runtime.sandbox import bwrap
from judger.runtime.sandbox.inside import wire
from judger.runtime.sandbox.runner import _HEADER_SLACK, _Sandbox
from judger.scorers.code import same_stdout
from judger.testing.processes import sandbox_processes_after

pytestmark = [
    pytest.mark.skipif(bool(bwrap.probe()), reason=f"bubblewrap unavailable: {bwrap.probe()}"),
    pytest.mark.py310,
]


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


@pytest.fixture(autouse=True)
def no_process_left_behind() -> Iterator[None]:
    yield
    assert sandbox_processes_after(5.0) == [], "a sandbox process outlived its sample"


async def judge(config: CodeJudgerConfig, cases: list[tuple[str, Any]]) -> list[RolloutState]:
    states = [
        RolloutState(response=fenced(code), reward_model={"ground_truth": tests}) for code, tests in cases
    ]
    return await config.build().batch_judge(states)


def scores(states: list[RolloutState]) -> list[float | None]:
    return [s.reward["score"] if s.reward else None for s in states]


# --- item 4: the program's names never replace the test's builtins ------------------------------

MBPP_SET = {"test": ["assert set(similar_elements((3, 4, 5, 6), (5, 7, 4, 10))) == set((4, 5))"]}
HUMANEVAL_ABS = {
    "test": "def check(candidate):\n    assert abs(candidate(2.0) - 1.4142135623730951) < 1e-6\n",
    "entry_point": "root",
}
HUMANEVAL_MANY = {
    "test": (
        "def check(candidate):\n"
        "    got = candidate([3, 1, 2])\n"
        "    assert isinstance(got, list)\n"
        "    assert len(got) == 3\n"
        "    assert sorted(got) == got\n"
        "    assert all(a <= b for a, b in zip(got, got[1:]))\n"
        "    assert got == [1, 2, 3]\n"
    ),
    "entry_point": "order",
}
HONEST_MBPP = "def similar_elements(a, b):\n    return tuple(set(a) & set(b))"
HONEST_ABS = "def root(x):\n    return x ** 0.5"
HONEST_MANY = "def order(xs):\n    return sorted(xs)"
SHADOWS = [
    ("def set(*a):\n    return 0\ndef similar_elements(a, b):\n    return ()", MBPP_SET),
    ("def abs(x):\n    return 0\ndef root(x):\n    return 0", HUMANEVAL_ABS),
    # one shadow per builtin the test uses, each making its assert vacuous
    (
        "def isinstance(*a):\n    return True\ndef len(x):\n    return 3\ndef sorted(x):\n    return x\n"
        "all = lambda *a: True\ndef order(xs):\n    return xs\n",
        HUMANEVAL_MANY,
    ),
    # a test's name bound by the program as a value, and a `check` of its own
    ("abs = 0\ndef check(candidate):\n    return None\ndef root(x):\n    return 0", HUMANEVAL_ABS),
]


async def test_a_programs_names_never_replace_the_builtins_its_tests_use() -> None:
    config = CodeJudgerConfig(wall_s=5, cpu_s=5)
    honest = [(HONEST_MBPP, MBPP_SET), (HONEST_ABS, HUMANEVAL_ABS), (HONEST_MANY, HUMANEVAL_MANY)]
    out = await judge(config, SHADOWS + honest)
    assert scores(out) == [0.0] * len(SHADOWS) + [1.0] * len(honest), [s.reward for s in out]


async def test_tests_still_see_the_helpers_they_call_by_name() -> None:
    # HumanEval/38's convention: the test calls the prompt's helper `encode_cyclic` by name
    tests = {
        "test": "def check(candidate):\n    assert candidate(encode_cyclic('abcdef')) == 'abcdef'\n",
        "entry_point": "decode_cyclic",
    }
    helper = "def encode_cyclic(s):\n    return s[1:] + s[:1]\n"
    honest = helper + "def decode_cyclic(s):\n    return s[-1:] + s[:-1]"
    wrong = helper + "def decode_cyclic(s):\n    return s"
    out = await judge(CodeJudgerConfig(wall_s=5, cpu_s=5), [(honest, tests), (wrong, tests)])
    assert scores(out) == [1.0, 0.0]


# --- item 6: exceptions from the program cannot steer the test -----------------------------------

ALL_MAP = {
    "test": "def check(candidate):\n    assert all(map(candidate, [1, 2, 3]))\n",
    "entry_point": "positive",
}
MBPP_ALL_MAP = {"test": ["assert all(map(positive, [1, 2, 3]))", "assert not any(map(positive, [-1, -2]))"]}
STEERING = [
    "def positive(x):\n    raise StopIteration",
    # a class of its own under the builtin's name
    "class StopIteration(Exception):\n    pass\ndef positive(x):\n    raise StopIteration()",
    "class Done(StopIteration):\n    pass\ndef positive(x):\n    raise Done()",
    "def positive(x):\n    raise StopAsyncIteration",
    "def positive(x):\n    raise GeneratorExit",
    "def positive(x):\n    raise SystemExit(0)",
    "def positive(x):\n    raise KeyboardInterrupt",
]
HONEST_POSITIVE = "def positive(x):\n    return x > 0"


async def test_control_flow_exceptions_from_the_program_fail_the_test() -> None:
    config = CodeJudgerConfig(wall_s=5, cpu_s=5)
    cases = [(program, tests) for tests in (ALL_MAP, MBPP_ALL_MAP) for program in STEERING]
    honest = [(HONEST_POSITIVE, ALL_MAP), (HONEST_POSITIVE, MBPP_ALL_MAP)]
    out = await judge(config, cases + honest)
    assert scores(out) == [0.0] * len(cases) + [1.0, 1.0], [s.reward for s in out]
    assert out[0].reward is not None and "StopIteration" in out[0].reward["error"]


def test_forgeries_through_judger_serve() -> None:
    import httpx

    from judger.server.app import create_app
    from judger.testing import serve_asgi

    cases = [
        (STEERING[0], ALL_MAP, 0.0),
        (SHADOWS[0][0], MBPP_SET, 0.0),
        (SHADOWS[1][0], HUMANEVAL_ABS, 0.0),
        (HONEST_POSITIVE, ALL_MAP, 1.0),
        (HONEST_MBPP, MBPP_SET, 1.0),
    ]
    with serve_asgi(create_app(CodeJudgerConfig(wall_s=5, cpu_s=5))) as server:
        for program, tests, want in cases:
            reply = httpx.post(
                server.url + "/reward", json={"response": fenced(program), "label": tests}, timeout=60
            )
            assert reply.status_code == 200 and reply.json()["score"] == want, (program, reply.text)


# --- item 7: replies that cost the judge more to decode than to send ----------------------------

# call mode: the program writes its own reply, `[[],[],...]` of about 8 MB, on its response pipe
CRAFTED_REPLY = (
    "import gc, os\n"
    "def f(x):\n"
    "    channel = next(o for o in gc.get_objects() if type(o).__name__ == '_Wire')\n"
    "    body = b'[' + b'[],' * 2_800_000 + b'[]]'\n"
    '    os.write(channel.response_fd, b\'{"id":1,"ok":true,"value":\' + body + b\'}\\n\')\n'
    "    return 0\n"
)


async def loop_lag_and_peak(work: Callable[[], Awaitable[Any]]) -> tuple[Any, float, float]:
    """Run ``work`` while a ticker measures the event loop's longest stall (s) and tracemalloc
    this process's peak growth (MB)."""
    lag = 0.0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal lag
        last = time.monotonic()
        while not stop.is_set():
            await asyncio.sleep(0.01)
            now = time.monotonic()
            lag = max(lag, now - last - 0.01)
            last = now

    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tick = asyncio.ensure_future(ticker())
        result = await work()
        stop.set()
        await tick
        peak = (tracemalloc.get_traced_memory()[1] - base) / 1e6
    finally:
        tracemalloc.stop()
    return result, lag, peak


async def test_an_amplifying_reply_is_refused_before_it_is_decoded() -> None:
    config = CodeJudgerConfig(wall_s=20, cpu_s=20, memory_mb=1024)
    tests = {"inputs": [[1]], "outputs": [0], "fn_name": "f"}
    (out,), lag, peak = await loop_lag_and_peak(lambda: judge(config, [(CRAFTED_REPLY, tests)]))
    assert out.status != Status.FAILED and out.reward is not None, out.error_msg
    assert out.reward["score"] == 0.0 and "refused" in out.reward["error"], out.reward
    assert peak < 32, f"the host grew by {peak:.0f} MB"
    assert lag < 1.0, f"the event loop stalled {lag:.2f} s"
    (honest,) = await judge(config, [("def f(x):\n    return x - 1", tests)])
    assert honest.reward is not None and honest.reward["score"] == 1.0


async def test_the_host_refuses_an_amplifying_report_line_without_decoding_it() -> None:
    # what reaches the host if anything but the supervisor wrote the report channel
    cap = 64 * 1024 * 1024
    stdout = asyncio.StreamReader(limit=cap + _HEADER_SLACK)
    header = b'{"event":"test","index":0,"status":"ok","output":[' + b"[]," * 2_800_000 + b"[]]}\n"
    stdout.feed_data(header)
    stdout.feed_eof()
    sandbox = _Sandbox(SimpleNamespace(), SimpleNamespace(), cap, None)  # type: ignore[arg-type]
    sandbox.stdout = stdout
    message, lag, peak = await loop_lag_and_peak(lambda: sandbox.next_message(10))
    assert message is not None and message["event"] == "refused", message
    assert peak < 32 and lag < 0.5, (peak, lag)
    # an honest report of the same size, a long list of numbers, still decodes
    assert json.loads(b"[" + b"1234567," * 1000 + b"0]") == wire.loads(b"[" + b"1234567," * 1000 + b"0]")


def test_comparing_a_flood_of_tokens_costs_what_the_expected_output_costs() -> None:
    flood = "1 " * 5_000_000
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        assert not same_stdout(flood, "1")
        assert not same_stdout("\n" * 5_000_000 + "1\n" * 2_000_000, "1\n1")
        peak = (tracemalloc.get_traced_memory()[1] - base) / 1e6
    finally:
        tracemalloc.stop()
    assert peak < 24, f"{peak:.0f} MB to compare"
    assert same_stdout("1\n\n1\n\n", "1\n1") and same_stdout("  1 1", "1\n1")


def test_output_bytes_are_compared_as_bytes_and_decoded_only_as_numbers() -> None:
    # the sandbox hands stdout over as bytes: equal tokens compare as bytes, numbers keep their
    # tolerance, and a flood of invalid UTF-8 is never decoded (it would cost twice its size or more)
    assert same_stdout(b"42\n", "42") and same_stdout(bytearray(b" 1 2\n3 "), "1 2\n3")
    assert same_stdout(b"0.3333333", "0.33333333") and same_stdout(b"7.0", "7")
    assert not same_stdout(b"1e9", "1000000006") and not same_stdout(b"42 43", "42")
    assert same_stdout("caf\u00e9".encode(), "caf\u00e9") and not same_stdout(b"caf\xe9", "caf\u00e9")
    flood, floods = b"\xff" * (16 << 20), b"0.5 " + b"\xff" * (16 << 20)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        assert not same_stdout(flood, "42") and not same_stdout(floods, "0.5 1.5")
        peak = (tracemalloc.get_traced_memory()[1] - base) / 2**20
    finally:
        tracemalloc.stop()
    # at most one copy of the output, split into tokens; decoded, it was three times its size
    assert peak <= 17, f"{peak:.0f} MiB to compare 16 MiB"


# --- item 9: slowness is the program's verdict, and a CPU kill is a CPU timeout ------------------


async def test_a_program_slow_on_every_test_scores_zero_instead_of_failing_the_sample() -> None:
    # every test within wall_s, all of them together (27 s) far past the judger's timeout (3 s)
    config = CodeJudgerConfig(wall_s=1.5, cpu_s=1.5, timeout=3, continuous=False)
    many = {"inputs": [str(i) for i in range(30)], "outputs": [str(2 * i) for i in range(30)]}
    few = {"inputs": [str(i) for i in range(6)], "outputs": [str(2 * i) for i in range(6)]}
    slow = "import time\ntime.sleep(0.9)\nprint(2 * int(input()))"
    honest = "print(2 * int(input()))"
    start = time.monotonic()
    out = await judge(config, [(slow, many), (honest, few)])
    assert time.monotonic() - start < 5 * 3  # normally the 3 s timeout and a little
    assert out[0].status != Status.FAILED, out[0].error_msg
    assert scores(out) == [0.0, 1.0]
    assert out[0].reward is not None and out[0].reward["error"].startswith(
        "timeout: the sample's time budget"
    )


SPIN = "while True:\n    pass"
# ignoring SIGXCPU only moves the kill to the hard limit, which is SIGKILL
DEAF = "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass"


async def cpu_timeouts(program: str) -> None:
    config = CodeJudgerConfig(wall_s=30, cpu_s=0.5)
    tests = {"inputs": ["1"], "outputs": ["2"]}
    out = await judge(config, [(program, tests), ("print(int(input()) + 1)", tests)])
    assert scores(out) == [0.0, 1.0]
    assert out[0].reward is not None and out[0].reward["error"] == "timeout: CPU time limit exceeded"


async def test_a_cpu_limit_kill_in_stdin_mode_is_a_cpu_timeout() -> None:
    await cpu_timeouts(SPIN)


@pytest.mark.slow  # two CPU seconds, often ten of wall time on a loaded machine
async def test_a_program_that_ignores_sigxcpu_still_gets_a_cpu_timeout() -> None:
    await cpu_timeouts(DEAF)
