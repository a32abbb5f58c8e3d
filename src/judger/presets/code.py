"""CodeJudgerConfig: run the response's last Python block against JSON tests in the sandbox."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from functools import partial
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from judger.core.judger import DEFAULT_MAX_CONCURRENCY, OnError
from judger.core.judger import JudgerPayload as Payload
from judger.presets.base import ScorerFn, ScorerJudger, ScorerJudgerConfig
from judger.runtime.executors.base import Needs, spread
from judger.runtime.executors.pick import Setting, pick_executor
from judger.runtime.sandbox.bwrap import drops_to_own_uid
from judger.runtime.sandbox.runner import DEFAULT_MEMORY_MB, SandboxLimits, require_isolation
from judger.scorers.code import compute_score, sample_budget, sandbox_fusion_base, score_async


class CodeJudger(ScorerJudger):
    """A :class:`ScorerJudger` whose samples each run in their own sandboxed subprocess.

    Programs run as asyncio subprocesses (no worker pool in between), at most ``max_parallel`` at a
    time per event loop, on a :class:`~judger.runtime.executors.sandbox.SandboxExecutor` (slots,
    teardowns and sandboxes started ahead are its); each sample has the judger's ``timeout`` on top
    of the per-test limits, and a sample that overruns it is failed as a timeout with its process
    group killed. The tests themselves get :func:`~judger.scorers.code.sample_budget` of it: a
    program that spends that is scored, its remaining tests timeouts, before the deadline can fire.
    """

    def __init__(
        self,
        judger_name: str,
        options: dict[str, Any],
        *,
        limits: SandboxLimits,
        max_parallel: int,
        sandbox_fusion_url: str | None = None,
        on_error: OnError = "fail",
        timeout: float = 300.0,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    ) -> None:
        super().__init__(
            judger_name,
            compute_score,
            options,
            execution="inline",
            on_error=on_error,
            timeout=timeout,
            max_concurrency=max_concurrency,
        )
        self.limits = limits
        self.max_parallel = max_parallel
        self.sandbox_fusion_url = sandbox_fusion_url
        # local sandboxes are started ahead of the samples; a SandboxFusion server starts its own
        sandbox = {"max_parallel": max_parallel, "limits": None if sandbox_fusion_url else limits}
        self._executor = pick_executor(Needs(isolation=True), Setting(judger_name, sandbox=sandbox))

    async def _score(self, payloads: Sequence[Payload]) -> list[Any]:
        run = partial(
            score_async,
            limits=self.limits,
            sandbox_fusion_url=self.sandbox_fusion_url,
            budget_s=sample_budget(self.timeout),
        )
        calls = [self._call_args(p) for p in payloads]
        return await self._executor.run(partial(spread, run), calls, self.timeout)


class CodeJudgerConfig(ScorerJudgerConfig):
    """Code execution against test cases (see :mod:`judger.scorers.code` for the test format).

    ``backend="local"`` (default) runs the last fenced Python block of the response under
    bubblewrap (new user/PID/mount/IPC/UTS/network namespaces, uid 65534, read-only system, a
    private size-capped tmpfs scratch, rlimits, everything killed at the deadline; see
    :mod:`judger.runtime.sandbox.runner`). Building refuses with the fix when bubblewrap cannot run
    here, unless ``isolation="none-unsafe"`` explicitly accepts running model-written code guarded
    only by rlimits and an audit hook. ``backend="sandbox_fusion"`` sends each test to the
    SandboxFusion server at ``sandbox_fusion_url`` (``POST /run_code``). ``continuous=True``
    scores the fraction of tests passed; ``False`` scores all-or-nothing and stops at the first
    failure. ``compat="verl"`` follows verl's ``prime_code`` scoring rules.
    """

    judger_name: str = Field("code", description="the judger's name (in failures, logs and reports)")
    continuous: bool = Field(
        True,
        description=(
            "True: the fraction of tests passed; False: 1 only when all pass, stopping at the first failure"
        ),
    )
    max_tests: int | None = Field(None, ge=1, description="score only the first max_tests tests")
    wall_s: float = Field(10.0, gt=0, description="wall-clock seconds per test")
    cpu_s: float = Field(10.0, gt=0, description="CPU seconds per test (RLIMIT_CPU)")
    memory_mb: int = Field(
        DEFAULT_MEMORY_MB, gt=0, description="address-space limit of the program (RLIMIT_AS)"
    )
    output_mb: int = Field(64, gt=0, description="largest file (stdout included) the program may write")
    scratch_mb: int = Field(256, gt=0, description="total size of the program's scratch tmpfs")
    scratch_inodes: int = Field(
        16384,
        gt=0,
        description=(
            "files and folders the scratch tmpfs holds (bounded where the judge runs as root; "
            "elsewhere only the memory limit bounds them)"
        ),
    )
    processes: int = Field(
        64,
        gt=0,
        description=(
            "RLIMIT_NPROC, which the kernel skips when the judge runs as root; new processes are "
            "refused outright, threads are also bounded by memory_mb"
        ),
    )
    isolation: Literal["bwrap", "none-unsafe"] = Field(
        "bwrap", description="'none-unsafe' runs untrusted code without kernel isolation"
    )
    backend: Literal["local", "sandbox_fusion"] = Field(
        "local",
        description=(
            "'local': bubblewrap sandboxes on this machine; 'sandbox_fusion': each test on the "
            "SandboxFusion server at sandbox_fusion_url"
        ),
    )
    sandbox_fusion_url: str | None = Field(
        None, description="SandboxFusion base URL (backend='sandbox_fusion')"
    )
    max_parallel: int = Field(
        default_factory=lambda: max(1, os.cpu_count() or 1),
        ge=1,
        description="sandboxes running at once per event loop; default: this machine's CPU count",
    )
    timeout: float = Field(
        300.0,
        gt=0,
        description=(
            "deadline of one sample (all of its tests), in seconds; its tests share all but a margin "
            "of it, and a program that spends that scores its remaining tests as timeouts"
        ),
    )
    execution: Literal["inline"] = Field("inline", description="programs always run in their own subprocess")

    def preset_floor(self) -> float:
        return 0.0  # a pass rate

    def scorer(self) -> ScorerFn:
        return compute_score

    def scorer_options(self) -> dict[str, Any]:
        return {"compat": self.compat, "continuous": self.continuous, "max_tests": self.max_tests}

    def limits(self) -> SandboxLimits:
        return SandboxLimits(
            wall_s=self.wall_s,
            cpu_s=self.cpu_s,
            memory_mb=self.memory_mb,
            output_mb=self.output_mb,
            scratch_mb=self.scratch_mb,
            scratch_inodes=self.scratch_inodes,
            processes=self.processes,
            isolation=self.isolation,
        )

    @field_validator("sandbox_fusion_url")
    @classmethod
    def _base_url(cls, url: str | None) -> str | None:
        return sandbox_fusion_base(url) if url else url

    @model_validator(mode="after")
    def _backend_needs_its_url(self) -> CodeJudgerConfig:
        if self.backend == "sandbox_fusion" and not self.sandbox_fusion_url:
            raise ValueError("backend='sandbox_fusion' needs sandbox_fusion_url (e.g. http://host:8080)")
        if self.backend == "local" and self.sandbox_fusion_url:
            raise ValueError("sandbox_fusion_url is set but backend='local': set backend='sandbox_fusion'")
        return self

    def fitted_to(self, cpus: float) -> CodeJudgerConfig:
        """This config for a worker that holds ``cpus`` CPUs of a larger machine (a Ray actor, one
        of several on a node): at most that many sandboxes at once, unless ``max_parallel`` was
        given. The default counts the whole machine's CPUs, which every actor on it would then use."""
        if "max_parallel" in self.model_fields_set:
            return self
        return self.model_copy(update={"max_parallel": max(1, math.ceil(cpus))})

    def build_local(self) -> CodeJudger:
        if self.backend == "local":
            require_isolation(self.isolation)  # refuse now, by name, rather than fail every sample
            if "scratch_inodes" in self.model_fields_set and not (
                self.isolation == "bwrap" and drops_to_own_uid()
            ):
                raise ValueError(
                    "scratch_inodes is honoured only by a judge that runs as root with "
                    "isolation='bwrap' (bubblewrap run unprivileged cannot cap a tmpfs's inodes); "
                    "leave it unset here: the memory limit bounds the scratch's inodes"
                )
        return CodeJudger(
            self.judger_name,
            self.scorer_options(),
            limits=self.limits(),
            max_parallel=self.max_parallel,
            sandbox_fusion_url=self.sandbox_fusion_url if self.backend == "sandbox_fusion" else None,
            on_error=self.on_error,
            timeout=self.timeout,
            max_concurrency=self.max_concurrency,
        )
