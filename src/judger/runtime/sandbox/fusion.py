"""Run tests on a SandboxFusion server (``POST /run_code``), the remote backend of the code judger.

One ``run_code`` request per test, the program written so its verdict can be checked here:

- ``stdin``: the program itself, with the test input as ``stdin``; its stdout is compared here.
- ``call``: the program, then a few lines that call the function on the JSON arguments and print
  the JSON return value after a random marker; the value is compared here.
- ``assert``: the program, then the test code (and ``check(entry_point)``), then a line printing a
  random marker; it passes when the run finishes with exit code 0 and the marker came back, so a
  program that ends the process with status 0 before its tests ran (``sys.exit(0)``,
  ``os._exit(0)``, an exception hook that exits) does not pass. The program and the tests share one
  interpreter on the server, as in SandboxFusion's own evaluation, so this verdict is only as
  strong as that (see docs/tasks/untrusted-code.md).

Every response is read with a size cap. A server error, an unreachable server or a malformed reply
is a judge failure (raised), never a wrong answer.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from typing import Any

import httpx

from judger.core.errors import JudgerError
from judger.runtime.sandbox.runner import Checker, Decided, Mode, SandboxLimits, SandboxResult, TestOutcome

_RESPONSE_SLACK = 1 << 16
_EXITED_EARLY = "the process ended with status 0 before the tests finished"


class SandboxFusionError(JudgerError, RuntimeError):
    """The SandboxFusion server could not run a test (not the program's fault)."""


def _call_program(code: str, fn_name: str, args: list[Any], marker: str) -> str:
    return (
        f"{code}\n\n"
        "import json as _judger_json, sys as _judger_sys\n"
        f"_judger_fn = globals().get({fn_name!r})\n"
        "if _judger_fn is None and isinstance(globals().get('Solution'), type):\n"
        f"    _judger_fn = getattr(Solution(), {fn_name!r}, None)\n"
        "if not callable(_judger_fn):\n"
        f"    raise NameError('the program defines no function {fn_name}')\n"
        f"_judger_out = _judger_json.dumps(_judger_fn(*_judger_json.loads({json.dumps(args)!r})))\n"
        f"_judger_sys.stdout.write('\\n' + {marker!r} + _judger_out + '\\n')\n"
    )


def _assert_program(code: str, test: str, entry_point: str | None, marker: str) -> str:
    tail = f"\ncheck({entry_point})\n" if entry_point else "\n"
    # printed only once the tests have returned: exit status 0 alone is the program's to give
    done = f"import sys as _judger_sys\n_judger_sys.stdout.write('\\n' + {marker!r} + '\\n')\n"
    return f"{code}\n\n{test}\n{tail}{done}"


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][:2000] if lines else ""


async def _run_code(client: httpx.AsyncClient, url: str, request: dict[str, Any], cap: int) -> dict[str, Any]:
    try:
        async with client.stream("POST", url.rstrip("/") + "/run_code", json=request) as response:
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > cap:
                    return {"status": "Failed", "run_result": {"status": "OutputTooLarge"}}
            if response.status_code != 200:
                raise SandboxFusionError(f"SandboxFusion /run_code answered HTTP {response.status_code}")
    except httpx.HTTPError as exc:
        raise SandboxFusionError(f"SandboxFusion at {url} is unreachable: {exc!r}") from exc
    try:
        reply = json.loads(body)
    except ValueError:
        raise SandboxFusionError("SandboxFusion /run_code sent a reply that is not JSON") from None
    if not isinstance(reply, dict) or reply.get("status") == "SandboxError":
        raise SandboxFusionError(
            f"SandboxFusion could not run the program: {str(reply.get('message', ''))[:500]}"
        )
    return reply


def _outcome_fields(reply: dict[str, Any]) -> tuple[str, str, str]:
    """(status, stdout, error) of one ``run_code`` reply."""
    run = reply.get("run_result") or {}
    compiled = reply.get("compile_result") or {}
    if compiled.get("status") not in (None, "Finished") or (compiled.get("return_code") or 0) != 0:
        return "error", "", _last_line(str(compiled.get("stderr", ""))) or "compilation failed"
    kind = run.get("status")
    if kind == "TimeLimitExceeded":
        return "timeout", "", "wall time limit exceeded (SandboxFusion)"
    if kind == "OutputTooLarge":
        return "error", "", "output size limit exceeded"
    if kind != "Finished":
        return "error", "", f"SandboxFusion run status {kind!r}"
    if run.get("return_code") != 0:
        return "error", "", _last_line(str(run.get("stderr", ""))) or f"exit code {run.get('return_code')}"
    return "ok", str(run.get("stdout", "")), ""


async def run_tests_remote(
    url: str,
    code: str,
    mode: Mode,
    tests: Sequence[Any],
    check: Checker,
    *,
    limits: SandboxLimits,
    decided: Decided | None = None,
    fn_name: str | None = None,
    entry_point: str | None = None,
    client: httpx.AsyncClient | None = None,
) -> SandboxResult:
    """:func:`~judger.runtime.sandbox.runner.run_tests` on a SandboxFusion server at ``url``."""
    n = len(tests)
    outcomes: list[TestOutcome | None] = [None] * n
    cap = limits.output_mb * 1024 * 1024 + _RESPONSE_SLACK
    own = client is None
    http = client or httpx.AsyncClient(timeout=httpx.Timeout(limits.wall_s + 30))
    try:
        for index, test in enumerate(tests):
            if decided and decided(outcomes):
                break
            marker = f"@@judger-{secrets.token_hex(8)}@@"
            if mode == "stdin":
                program, stdin = code, str(test)
            elif mode == "call":
                program, stdin = _call_program(code, str(fn_name), list(test), marker), ""
            else:
                program, stdin = _assert_program(code, str(test), entry_point, marker), ""
            request = {
                "code": program,
                "language": "python",
                "stdin": stdin,
                "run_timeout": limits.wall_s,
                "memory_limit_MB": limits.memory_mb,
            }
            status, stdout, error = _outcome_fields(await _run_code(http, url, request, cap))
            if status != "ok":
                outcomes[index] = TestOutcome("timeout" if status == "timeout" else "error", error)
                continue
            if mode == "assert" and marker not in stdout:
                outcomes[index] = TestOutcome("error", _EXITED_EARLY)
                continue
            report: dict[str, Any] = {"event": "test", "index": index, "status": "ok", "stdout": stdout}
            if mode == "call":
                found = stdout.rfind(marker)
                after = stdout[found + len(marker) :].splitlines() if found >= 0 else []
                try:
                    report["output"] = json.loads(after[0])
                except (ValueError, IndexError):
                    outcomes[index] = TestOutcome("error", "no return value came back")
                    continue
            outcomes[index] = check(index, report)
    finally:
        if own:
            await http.aclose()
    return SandboxResult(
        outcomes=[o if o is not None else TestOutcome("not_run") for o in outcomes], network="sandbox_fusion"
    )
