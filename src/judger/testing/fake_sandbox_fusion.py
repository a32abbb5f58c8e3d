"""A small, honest fake of SandboxFusion's ``POST /run_code``, for tests (its real server needs a
container runtime).

``FakeSandboxFusion().app`` is a FastAPI app; serve it with :func:`judger.testing.serve_asgi`.
It really runs the Python program it is sent, in judger's own bubblewrap sandbox (a program's
stdout, exit status and stderr are whatever the program produced), and answers in SandboxFusion's
shape::

    {"status": "Success" | "Failed" | "SandboxError", "message": str, "compile_result": null,
     "run_result": {"status": "Finished" | "TimeLimitExceeded" | "Error", "execution_time": float,
                    "return_code": int | null, "stdout": str, "stderr": str},
     "executor_pod_name": null, "files": {}}

Only ``language="python"`` is supported (``SandboxError`` otherwise, as the real server does for
an unknown language). ``mode="error500"`` makes every request fail with HTTP 500. Counters:
``requests`` (all bodies), ``in_flight``, ``max_in_flight``.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from judger.runtime.sandbox.runner import DEFAULT_MEMORY_MB, SandboxLimits, TestOutcome, run_tests


class FakeSandboxFusion:
    def __init__(self, isolation: str = "bwrap") -> None:
        self.isolation = isolation
        self.mode = "ok"
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.app = self._build_app()

    async def run_code(self, body: dict[str, Any]) -> dict[str, Any]:
        if body.get("language") != "python" or not isinstance(body.get("code"), str):
            return {"status": "SandboxError", "message": "unsupported language", "run_result": None}
        timeout = float(body.get("run_timeout") or 10)
        memory = int(body.get("memory_limit_MB") or DEFAULT_MEMORY_MB)
        if memory <= 0:
            memory = DEFAULT_MEMORY_MB
        limits = SandboxLimits(wall_s=timeout, cpu_s=timeout, memory_mb=memory, isolation=self.isolation)  # type: ignore[arg-type]
        seen: dict[str, Any] = {}

        def keep(index: int, report: dict[str, Any]) -> TestOutcome:
            seen.update(report)
            return TestOutcome("passed")

        started = time.monotonic()
        result = await run_tests(body["code"], "stdin", [str(body.get("stdin") or "")], keep, limits=limits)
        outcome = result.outcomes[0]
        run: dict[str, Any] = {
            "status": "Finished",
            "execution_time": time.monotonic() - started,
            "return_code": 0,
            "stdout": bytes(seen.get("stdout", b"")).decode("utf-8", "replace"),
            "stderr": "",
        }
        if outcome.status == "timeout":
            run.update(status="TimeLimitExceeded", return_code=None)
        elif not outcome.passed:
            run.update(return_code=1, stderr=outcome.detail)
        ok = run["status"] == "Finished" and run["return_code"] == 0
        return {
            "status": "Success" if ok else "Failed",
            "message": "",
            "compile_result": None,
            "run_result": run,
            "executor_pod_name": None,
            "files": {},
        }

    def _build_app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/run_code")
        async def run_code(request: Request) -> Any:
            body = await request.json()
            self.requests.append(body)
            if self.mode == "error500":
                return JSONResponse({"detail": "internal error"}, status_code=500)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                return await self.run_code(body)
            finally:
                self.in_flight -= 1

        return app
