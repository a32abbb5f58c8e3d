"""Code execution: run the response's last Python block against test cases in the sandbox.

Tests (``ground_truth``, a dict or its JSON text):

- ``{"inputs": [...], "outputs": [...]}``: stdin/stdout programs. Each input (a string, or a list of
  lines) is the program's stdin; its stdout must match the output. Comparison: whitespace-separated
  tokens (outer whitespace and blank lines do not count); where the expected token is a decimal
  number (with ``.``, ``e`` or ``E``) the printed one may differ by 1e-6 (relative or absolute);
  where it is an integer the printed one must be that exact value (``7`` or ``7.0``, never ``1e9``
  for ``1000000006``).
- ``{"inputs": [...], "outputs": [...], "fn_name": "f"}``: call ``f`` (or ``Solution().f``) with each
  input as the argument list (a JSON list, or a string of one JSON value per line as in APPS/PRIME
  data); the return value (tuples as lists) must equal the output (a JSON value, or its JSON text
  as in APPS/PRIME data: a string output is then ``"\"abc\""``; text that is not JSON stays a
  string); an output wrapped in a one-element list also matches its element (APPS convention).
- ``{"test": "<code>" | [...], "entry_point"?: "f"}``: assert-style tests (HumanEval, MBPP). Each
  snippet runs in the program's namespace, then ``check(f)`` when ``entry_point`` is given; a test
  passes when nothing raises.

Scores: ``continuous=True`` gives the fraction of tests passed, ``False`` gives 1.0 only when all
pass (stopping at the first failure). ``max_tests`` caps how many tests count.

``compat="verl"`` follows verl's ``prime_code`` rules: the code is
``response.split("```python")[-1].split("```")[0]``; all tests passing scores 1.0, otherwise the
continuous score is the fraction passed among the first 10 tests (0.0 when not continuous). The test
harness is ours, so scores can differ from verl's where its harness differs (verl's output
comparison has more fallbacks; it runs code in-process with ``signal.alarm`` and no sandbox).
The default extraction also accepts ```` ```py ```` / ```` ```python3 ```` fences, falls back to the
last unlabelled fenced block, and takes the whole response only when it has no fence at all.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import partial
from typing import Any, Literal

from judger.core.deadlines import judge_deadline
from judger.runtime.sandbox.fusion import run_tests_remote
from judger.runtime.sandbox.runner import (
    DEFAULT_MEMORY_MB,
    Isolation,
    Mode,
    SandboxLimits,
    SandboxResult,
    TestOutcome,
    run_sync,
    run_tests,
    teardown_after,
)

VERL_CONTINUOUS_TESTS = 10
_PYTHON_TAGS = frozenset({"python", "python3", "py"})
_FLOAT_HINT = re.compile(r"[.eE]")
_INTEGER = re.compile(r"[+-]?[0-9]+")


# --- extraction --------------------------------------------------------------------------------


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """``(language, body)`` of each fenced block in order; an unclosed last block runs to the end."""
    blocks: list[tuple[str, str]] = []
    pos = 0
    while True:
        start = text.find("```", pos)
        if start < 0:
            return blocks
        newline = text.find("\n", start)
        if newline < 0:
            return blocks
        words = text[start + 3 : newline].split()
        end = text.find("```", newline + 1)
        body = text[newline + 1 :] if end < 0 else text[newline + 1 : end]
        blocks.append((words[0].lower() if words else "", body))
        if end < 0:
            return blocks
        pos = end + 3


def extract_code(response: str, *, compat: Literal["verl"] | None = None) -> str:
    """The program in ``response`` ("" when there is none)."""
    if compat == "verl":
        return response.split("```python")[-1].split("```")[0]
    blocks = fenced_blocks(response)
    for wanted in (_PYTHON_TAGS, frozenset({""})):
        bodies = [body for lang, body in blocks if lang in wanted]
        if bodies:
            return bodies[-1]
    return "" if "```" in response else response


# --- tests -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TestSuite:
    """Parsed test cases: what the child runs (``inputs``) and what we compare to (``expected``)."""

    mode: Mode
    inputs: list[Any]
    expected: list[Any]
    fn_name: str | None = None
    entry_point: str | None = None

    def __len__(self) -> int:
        return len(self.inputs)


def _call_args(raw: Any) -> list[Any]:
    if isinstance(raw, str):
        return [json.loads(line) for line in raw.split("\n") if line.strip()]
    if isinstance(raw, (list, tuple)):
        return list(raw)
    return [raw]


def _decoded(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _text(raw: Any) -> str:
    if isinstance(raw, (list, tuple)):
        return "\n".join(str(x) for x in raw)
    return raw if isinstance(raw, str) else str(raw)


def parse_tests(ground_truth: Any) -> TestSuite:
    """``ground_truth`` as a :class:`TestSuite`; ValueError says what is wrong with it."""
    spec = ground_truth
    if isinstance(spec, (str, bytes)):
        try:
            spec = json.loads(spec)
        except ValueError as exc:
            raise ValueError(f"code tests must be JSON; could not parse ground_truth: {exc}") from None
    if not isinstance(spec, dict):
        raise ValueError(f"code tests must be a dict (or its JSON), got {type(spec).__name__}")
    if "test" in spec:
        snippets = spec["test"]
        snippets = [snippets] if isinstance(snippets, str) else list(snippets)
        if not all(isinstance(s, str) for s in snippets):
            raise ValueError("code tests: 'test' must be source code (a str) or a list of them")
        return TestSuite("assert", snippets, [None] * len(snippets), entry_point=spec.get("entry_point"))
    if "inputs" not in spec or "outputs" not in spec:
        raise ValueError(
            "code tests need 'inputs' and 'outputs' (and optionally 'fn_name'), or 'test'; "
            f"got keys {sorted(spec)}"
        )
    inputs, outputs = list(spec["inputs"]), list(spec["outputs"])
    if len(inputs) != len(outputs):
        raise ValueError(f"code tests: {len(inputs)} inputs but {len(outputs)} outputs")
    fn_name = spec.get("fn_name")
    if fn_name:
        try:
            args = [_call_args(raw) for raw in inputs]
        except ValueError as exc:
            raise ValueError(f"code tests: a call-based input is not JSON: {exc}") from None
        return TestSuite("call", args, [_decoded(raw) for raw in outputs], fn_name=str(fn_name))
    return TestSuite("stdin", [_text(raw) for raw in inputs], [_text(raw) for raw in outputs])


# --- comparison --------------------------------------------------------------------------------


def _same_token(got: str, want: str) -> bool:
    if got == want:
        return True
    if _INTEGER.fullmatch(want):
        # an exact answer is compared exactly: "1e9" is not 1000000006, nor is a float estimate
        # of a large binomial its value; the same number written as a float ("7.0") still is
        if not _FLOAT_HINT.search(got):
            return False
        try:
            return Decimal(got) == Decimal(want)
        except (ArithmeticError, ValueError):  # decimal.InvalidOperation is an ArithmeticError
            return False
    if not _FLOAT_HINT.search(want):
        return False
    try:
        a, b = float(got), float(want)
    except ValueError:
        return False
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6)


def _same_token_bytes(got: bytes, want: str, want_bytes: bytes) -> bool:
    if got == want_bytes:
        return True
    # a number the program wrote is ASCII; nothing else is decoded (invalid UTF-8, replaced byte by
    # byte, costs the judge far more than its size)
    return got.isascii() and _same_token(got.decode("ascii"), want)


def same_stdout(got: str | bytes, want: str) -> bool:
    """Whether a program's stdout (its bytes, or text) matches the expected text (see the module
    docstring; bytes are split at ASCII whitespace)."""
    # Equal lines (stripped, trailing blank ones dropped) have equal tokens, so tokens decide
    # alone. At most one more piece than expected is split off: a stdout of millions of tokens
    # costs the judge one list as long as the expected one, not millions of strings. Bytes are
    # compared as bytes, a token decoded only where it is not the expected one byte for byte.
    want_tokens = want.split()
    if isinstance(got, str):
        got_tokens: list[Any] = got.split(None, len(want_tokens))
        return len(got_tokens) == len(want_tokens) and all(map(_same_token, got_tokens, want_tokens))
    got_tokens = got.split(None, len(want_tokens))
    return len(got_tokens) == len(want_tokens) and all(
        _same_token_bytes(g, w, w.encode()) for g, w in zip(got_tokens, want_tokens)
    )


def same_return(got: Any, want: Any, *, compat: Literal["verl"] | None = None) -> bool:
    """Whether a returned value (JSON-decoded) matches the expected one."""
    if got == want:
        return True
    # APPS wraps outputs in a list; verl accepts the first element of any list
    return isinstance(want, list) and bool(want) and (compat == "verl" or len(want) == 1) and got == want[0]


def _checker(suite: TestSuite, compat: Literal["verl"] | None) -> Any:
    def check(index: int, report: dict[str, Any]) -> TestOutcome:
        if report.get("status") != "ok":
            return TestOutcome("error", str(report.get("error", "")))
        if suite.mode == "assert":
            return TestOutcome("passed")
        if suite.mode == "stdin":
            stdout = report.get("stdout", b"")
            if not isinstance(stdout, (str, bytes, bytearray)):
                stdout = str(stdout)
            ok = same_stdout(stdout, suite.expected[index])
            return TestOutcome("passed") if ok else TestOutcome("failed", "wrong answer")
        ok = same_return(report.get("output"), suite.expected[index], compat=compat)
        return (
            TestOutcome("passed")
            if ok
            else TestOutcome("failed", f"wrong answer: returned {report.get('output')!r:.200}")
        )

    return check


# --- scoring -----------------------------------------------------------------------------------


def _decider(n: int, continuous: bool, compat: Literal["verl"] | None) -> Any:
    verl_window = min(VERL_CONTINUOUS_TESTS, n)

    def decided(outcomes: Sequence[TestOutcome | None]) -> bool:
        failed = next((i for i, o in enumerate(outcomes) if o is not None and not o.passed), None)
        if failed is None:
            return False
        if not continuous:
            return True
        # verl scores the first 10 once anything fails: the rest cannot change the score
        return compat == "verl" and all(o is not None for o in outcomes[:verl_window])

    return decided


def _score(result: SandboxResult, n: int, continuous: bool, compat: Literal["verl"] | None) -> float:
    if n == 0:
        return 0.0
    outcomes = result.outcomes
    if all(o.passed for o in outcomes):
        return 1.0
    if not continuous:
        return 0.0
    if compat == "verl":
        window = outcomes[: min(VERL_CONTINUOUS_TESTS, n)]
        return sum(o.passed for o in window) / len(window)
    return result.passed / n


def sample_budget(timeout: float) -> float:
    """The wall time a sample's tests may take together: the judger's ``timeout`` less a margin to
    start its sandbox. A program slow on many tests then meets this budget and scores its
    timeouts; only a judge that is itself stuck meets the deadline (a failed sample)."""
    margin = min(5.0, max(0.5, timeout / 10))
    return max(timeout / 2, timeout - margin)


def _empty(code: str | None, n: int, status: str, error: str = "") -> dict[str, Any]:
    return {
        "score": 0.0,
        "acc": False,
        "pred": code or None,
        "passed": 0,
        "total": n,
        "status": status,
        "error": error,
        "network": "",
    }


def sandbox_fusion_base(url: str) -> str:
    """The server's base URL from either form users give: verl's configs name the endpoint itself
    (``http://host:8080/run_code``, which verl posts to as is), judger's the server
    (``http://host:8080``, to which the client adds ``/run_code``)."""
    base = url.strip().rstrip("/")
    if base.endswith("/run_code"):
        base = base[: -len("/run_code")]
    return base


async def score_async(
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    *,
    compat: Literal["verl"] | None = None,
    continuous: bool = True,
    max_tests: int | None = None,
    limits: SandboxLimits | None = None,
    sandbox_fusion_url: str | None = None,
    budget_s: float | None = None,
) -> dict[str, Any]:
    """Score one response: ``{"score", "acc", "pred", "passed", "total", "status", "error", "network"}``.

    ``status`` is ``"passed"`` (every test passed), ``"failed"`` or ``"no_code"``; ``error`` is the
    first failing test's reason ("" if none). Malformed tests raise ValueError: a judge failure,
    not a wrong answer. With ``sandbox_fusion_url`` the tests run on that SandboxFusion server
    (:mod:`judger.runtime.sandbox.fusion`) instead of the local bubblewrap sandbox. ``budget_s``
    bounds the local sandbox's wall time for all the tests together (the rest are then timeouts).
    """
    if compat not in (None, "verl"):
        raise ValueError(f"compat must be 'verl' or None, got {compat!r}")
    suite = parse_tests(ground_truth)
    if max_tests is not None:
        suite = TestSuite(
            suite.mode, suite.inputs[:max_tests], suite.expected[:max_tests], suite.fn_name, suite.entry_point
        )
    n = len(suite)
    code = extract_code(solution_str or "", compat=compat)
    if not code.strip():
        return _empty(None, n, "no_code", "no Python code block in the response")
    if n == 0:
        return _empty(code, 0, "failed", "no tests")
    limits = limits or SandboxLimits()
    if sandbox_fusion_url:
        sandbox_fusion_url = sandbox_fusion_base(sandbox_fusion_url)
    run = (
        partial(run_tests_remote, sandbox_fusion_url)
        if sandbox_fusion_url
        else partial(run_tests, budget_s=budget_s)
    )
    result = await run(
        code,
        suite.mode,
        suite.inputs,
        _checker(suite, compat),
        limits=limits,
        decided=_decider(n, continuous, compat),
        fn_name=suite.fn_name,
        entry_point=suite.entry_point,
    )
    score = _score(result, n, continuous, compat)
    first = result.first_failure()
    return {
        "score": float(score),
        "acc": result.passed == n,
        "pred": code,
        "passed": result.passed,
        "total": n,
        "status": "passed" if result.passed == n else "failed",
        "error": f"{first.status}: {first.detail}" if first is not None else "",
        "network": result.network,
    }


def compute_score(
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    *,
    compat: Literal["verl"] | None = None,
    continuous: bool = True,
    max_tests: int | None = None,
    wall_s: float = 10.0,
    cpu_s: float = 10.0,
    memory_mb: int = DEFAULT_MEMORY_MB,
    output_mb: int = 64,
    scratch_mb: int = 256,
    isolation: Isolation = "bwrap",
    sandbox_fusion_url: str | None = None,
    timeout: float | None = None,
) -> dict[str, Any]:
    """Synchronous :func:`score_async` (any thread; a private event loop runs the sandbox).

    ``timeout`` is the sample's deadline, as a code judger's: its tests share
    :func:`sample_budget` of it (a program that spends that scores its remaining tests as
    timeouts), and a sample still unscored at the deadline raises
    :class:`~judger.core.errors.JudgeTimeoutError`; the sandbox's teardown is waited for after it.
    """
    if timeout is not None and not (isinstance(timeout, (int, float)) and 0 < timeout < math.inf):
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    limits = SandboxLimits(
        wall_s=wall_s,
        cpu_s=cpu_s,
        memory_mb=memory_mb,
        output_mb=output_mb,
        scratch_mb=scratch_mb,
        isolation=isolation,
    )

    async def score() -> dict[str, Any]:
        run = partial(
            score_async,
            solution_str,
            ground_truth,
            extra_info,
            compat=compat,
            continuous=continuous,
            max_tests=max_tests,
            limits=limits,
            sandbox_fusion_url=sandbox_fusion_url,
        )
        if timeout is None:
            return await run()
        # the teardown is waited for once the deadline's block is left, not inside it
        async with teardown_after(), judge_deadline("code", timeout):
            return await run(budget_s=sample_budget(timeout))

    return run_sync(score)
