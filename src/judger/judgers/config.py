"""Configs are data: pydantic models that ``build()`` into live judgers.

``JudgerConfig`` builds a local ``NativeJudger`` (or, with ``cpu_resources``, Ray actors running
it); subclasses override ``build_local()`` for their own Judger. ``ComposedJudgerConfig`` builds a
``ComposedJudger`` over configs or judgers, recursively.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from judger.core.judger import DEFAULT_MAX_CONCURRENCY, DEFAULT_TIMEOUT, BaseJudger, Judger
from judger.judgers.composed import ComposedJudger, check_branches
from judger.judgers.handlers import import_object, is_url
from judger.judgers.native import NativeJudger
from judger.runtime.threads import DEFAULT_MAX_HUNG


class CPUResourcesConfig(BaseModel):
    """CPU workers outside accelerator placement groups, for judging on Ray actors."""

    model_config = ConfigDict(extra="forbid")

    num_workers: int = Field(
        1, ge=1, description="Ray actors to start; 1 -> RemoteJudger, more -> JudgerPool"
    )
    num_cpus_per_worker: float = Field(1, gt=0, description="CPUs each actor reserves")
    cpu_memory_per_worker: int = Field(1024**3, gt=0, description="bytes of memory each actor reserves")
    pg_pack_strategy: str = Field(
        "SPREAD",
        description="XTuner's field; judger actors run outside placement groups and are spread over "
        "the nodes (Ray's SPREAD scheduling), so only 'SPREAD' is accepted",
    )

    @field_validator("pg_pack_strategy")
    @classmethod
    def _check_strategy(cls, value: str) -> str:
        strategies = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
        if value not in strategies:
            raise ValueError(f"pg_pack_strategy must be one of {strategies}, got {value!r}")
        if value != "SPREAD":
            raise ValueError(
                f"pg_pack_strategy={value!r} is not honoured: judger actors are not placed in a CPU "
                "placement group (neither are XTuner's judger actors, where the field only shapes "
                "AutoCPUWorkers groups); they are spread over the nodes as with 'SPREAD'. Leave it at "
                "'SPREAD' or remove it"
            )
        return value


class JudgerConfig(BaseModel):
    """How to build one judger.

    ``reward_handler`` is a function ``(response, label, extra_info) -> dict`` (sync or async), a
    ``"package.module:function"`` import string (configs with one pickle and serialise), or an
    ``http(s)://`` URL. ``timeout`` bounds every judge call; ``on_error`` decides whether a failure
    marks the sample FAILED ("fail") or raises ("raise").
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, validate_assignment=True)

    judger_name: str = Field(
        description="the judger's name: it names the judger in failures (judge_failure), logs and reports"
    )
    reward_handler: Callable[..., Any] | str | None = Field(
        None,
        description=(
            "the scoring function: a sync or async function (response, label, extra_info) -> dict, a "
            "'package.module:function' import string, or an http(s):// URL answering POST {response, "
            "label, extra_info}"
        ),
    )
    request_timeout: float = Field(
        30.0,
        gt=0,
        description=(
            "seconds one HTTP request to a URL reward_handler may take (its retries each get this again)"
        ),
    )
    extra_info: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "the handler's extra_info: a copy, overlaid with each sample's extra_fields['extra_info']"
        ),
    )
    cpu_resources: CPUResourcesConfig | None = Field(
        None,
        description="judge on Ray actors (RemoteJudger, or a JudgerPool of several); None: in this process",
    )
    on_error: Literal["fail", "raise"] = Field(
        "fail",
        description=(
            "'fail': a sample whose judging fails or times out is FAILED with its reason and the batch "
            "goes on; 'raise': the exception propagates (XTuner's behaviour)"
        ),
    )
    timeout: float = Field(DEFAULT_TIMEOUT, gt=0, description="deadline of one judge call, in seconds")
    max_concurrency: int = Field(
        DEFAULT_MAX_CONCURRENCY, ge=1, description="samples judged at once in batch_judge"
    )
    batched: bool | None = Field(None, description="the handler takes lists; None: decide from the function")
    execution: Literal["auto", "thread", "process"] = Field(
        "auto",
        description="where a sync handler runs. 'auto': in killable worker processes when a worker can "
        "load it (an import string, or a function of an importable module), else on threads, said once "
        "at build; 'process': in worker processes, refused at build when no worker can load it; "
        "'thread': on threads, declaring that it always returns (a hung call keeps its thread for good)",
    )
    num_threads: int | None = Field(
        None, ge=1, description="threads for a sync handler; None: cpus + 4 (in a Ray actor: its CPUs)"
    )
    max_hung_threads: int = Field(
        DEFAULT_MAX_HUNG,
        ge=0,
        description="sync-handler calls that overran their deadline allowed to keep a thread (a thread "
        "cannot be killed); past them the pool shrinks, and with every thread hung a sample fails at once",
    )
    handler_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="extra keyword arguments of the handler"
    )
    lowest_score: float | None = Field(
        None,
        allow_inf_nan=False,
        description="the lowest score the judger gives; what a trainer gives a sample it could not "
        "score by default (None: the preset's own, or unknown for a handler of yours: 0.0)",
    )

    @field_validator("reward_handler")
    @classmethod
    def _check_handler(cls, value: Any) -> Any:
        if isinstance(value, str) and not is_url(value) and ":" not in value and "." not in value:
            raise ValueError(
                f"reward_handler {value!r} is neither an http(s):// URL nor a "
                "'package.module:function' import string"
            )
        return value

    def build_local(self) -> Judger:
        """The judger this config describes, running in this process."""

        if self.reward_handler is None:
            raise ValueError(
                f"JudgerConfig(judger_name={self.judger_name!r}) has no reward_handler: pass a function, "
                "an async function, a 'package.module:function' string or an http(s):// URL, or subclass "
                "JudgerConfig and override build_local()"
            )
        if isinstance(self.reward_handler, str) and not is_url(self.reward_handler):
            import_object(self.reward_handler)  # fail at build time, not at the first sample
        return NativeJudger(
            judger_name=self.judger_name,
            reward_handler=self.reward_handler,
            extra_info=self.extra_info,
            request_timeout=self.request_timeout,
            on_error=self.on_error,
            timeout=self.timeout,
            max_concurrency=self.max_concurrency,
            batched=self.batched,
            handler_kwargs=self.handler_kwargs,
            num_threads=self.num_threads,
            execution=self.execution,
            max_hung_threads=self.max_hung_threads,
        )

    def score_floor(self) -> float | None:
        """The lowest score the built judger gives (``lowest_score``; None: not known)."""
        return self.lowest_score

    def build(self) -> Judger:
        return build_judger(self)


class ComposedJudgerConfig(BaseModel):
    """Branches by name (configs, nested composed configs, or built Judgers) and a merge_fn."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    branches: dict[str, Any] = Field(
        description=(
            "name -> JudgerConfig, ComposedJudgerConfig or built Judger; a sample's data_source picks the"
            " branch (a str) or branches with weights (a dict)"
        )
    )
    merge_fn: Callable[..., Any] | str | None = Field(
        None,
        description=(
            "combines the outputs of several selected branches: a function, its import string, or "
            "judger.weighted_sum; None: a sample may select one branch only"
        ),
    )
    merge_batch: bool | None = Field(
        None,
        description="merge_fn takes the seed's list form (list of states, {branch: list of outputs}); "
        "None: decide from the function (judger.batch_handler, or a list annotation)",
    )
    judger_name: str = Field(
        "composed_judger", description="the judger's name (in failures, logs and reports)"
    )
    on_error: Literal["fail", "raise"] = Field(
        "fail",
        description=(
            "'fail': a sample whose judging fails is FAILED with its reason; 'raise': the exception "
            "propagates. Routing errors always raise"
        ),
    )
    timeout: float = Field(DEFAULT_TIMEOUT, gt=0, description="deadline of an async merge_fn")
    max_concurrency: int = Field(
        DEFAULT_MAX_CONCURRENCY, ge=1, description="samples judged at once in batch_judge"
    )
    lowest_score: float | None = Field(
        None,
        allow_inf_nan=False,
        description="the lowest score a merge gives (None: a sample routed to one branch gets that "
        "branch's, a merged one is unknown)",
    )

    @field_validator("branches", mode="before")
    @classmethod
    def _parse_branches(cls, value: Any) -> Any:
        # plain dicts (from JSON or YAML) become configs; a dict with "branches" is a nested composition
        if isinstance(value, dict):
            return {
                name: (ComposedJudgerConfig if "branches" in b else JudgerConfig).model_validate(b)
                if isinstance(b, dict)
                else b
                for name, b in value.items()
            }
        return value

    @field_validator("branches")
    @classmethod
    def _check_branches(cls, value: dict[str, Any]) -> dict[str, Any]:
        if not value:
            raise ValueError("branches is empty: give at least one {'name': JudgerConfig(...)}")
        for name, branch in value.items():
            if isinstance(branch, BaseJudger) and not isinstance(branch, Judger):
                # TypeError is not wrapped by pydantic, so callers see the seed's exception type
                check_branches({name: branch})
            if not isinstance(branch, (JudgerConfig, ComposedJudgerConfig, Judger)):
                raise ValueError(
                    f"branch {name!r} must be a JudgerConfig, a ComposedJudgerConfig or a Judger, "
                    f"got {type(branch).__name__}"
                )
        return value

    def build_local(self) -> ComposedJudger:
        # Any: ComposedJudger checks each branch itself (a bare BaseJudger is refused there, by name)
        branches: dict[str, Any] = {
            name: branch if isinstance(branch, BaseJudger) else build_judger(branch)
            for name, branch in self.branches.items()
        }
        composed = ComposedJudger(
            branches,
            merge_fn=self.merge_fn,
            merge_batch=self.merge_batch,
            judger_name=self.judger_name,
            on_error=self.on_error,
            timeout=self.timeout,
            max_concurrency=self.max_concurrency,
        )
        composed.lowest_score = self.lowest_score
        return composed

    def build(self) -> ComposedJudger:
        return self.build_local()


def build_judger(cfg: JudgerConfig | ComposedJudgerConfig) -> Judger:
    """Build a live judger from a config: local, on Ray actors (``cpu_resources``), or composed."""
    if isinstance(cfg, ComposedJudgerConfig):
        return cfg.build_local()
    if not isinstance(cfg, JudgerConfig):
        raise TypeError(
            f"build_judger takes a JudgerConfig or ComposedJudgerConfig, got {type(cfg).__name__}"
        )
    judger = cfg.build_local() if cfg.cpu_resources is None else remote_builder()(cfg)
    floor = cfg.score_floor()
    if floor is not None:
        judger.lowest_score = floor
    return judger


RemoteBuilder = Callable[[JudgerConfig], Judger]

# Ray sits in a higher layer than the configs: it registers its builder when its module loads, so
# this module never imports Ray code. ``remote_builder`` loads that module by name on first use.
_REMOTE_BUILDER_MODULE = "judger.remote.build"
_remote_builders: list[RemoteBuilder] = []


def register_remote_builder(builder: RemoteBuilder) -> RemoteBuilder:
    """Make ``builder`` the one ``build_judger`` uses for configs with ``cpu_resources``."""
    _remote_builders[:] = [builder]
    return builder


def remote_builder() -> RemoteBuilder:
    if not _remote_builders:
        importlib.import_module(_REMOTE_BUILDER_MODULE)
    if not _remote_builders:
        raise RuntimeError(f"{_REMOTE_BUILDER_MODULE} registered no builder for cpu_resources")
    return _remote_builders[0]
