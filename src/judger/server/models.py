"""Request and response bodies of ``judger serve`` (they make the OpenAPI docs at /docs).

The server checks request bodies itself (:mod:`judger.server.requests`, cheaper and bounded); these
models describe the same protocol for clients and the docs.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class RewardRequest(BaseModel):
    """The seeds' URL-handler protocol: one sample."""

    model_config = ConfigDict(extra="forbid")

    response: str | None = Field(..., description="the model's response text")
    label: Any = Field(None, description="the ground truth (reward_model['ground_truth'])")
    extra_info: dict[str, Any] = Field(default_factory=dict, description="per-sample extra information")
    data_source: str | dict[str, float] | None = Field(
        None, description="optional: routes the sample in a composed judger"
    )


class RewardResponse(BaseModel):
    """The reward dict the judger produced: a numeric ``score`` plus whatever else it reports."""

    model_config = ConfigDict(extra="allow")

    score: float


class JudgeFailureBody(BaseModel):
    """Which judger failed on the sample, how, and its message."""

    judger: str
    kind: str = Field(..., description="'error' or 'timeout'")
    message: str


class ErrorBody(BaseModel):
    """Why a request was not answered with a reward."""

    detail: Any
    judge_failure: JudgeFailureBody | None = None


class JudgedState(BaseModel):
    """What ``/judge`` answers per state (``?full=true``: the whole judged RolloutState)."""

    reward: dict[str, Any] | None = Field(..., description="the reward dict; null when judging failed")
    status: str = Field(..., description="'completed', or 'failed' with error_msg")
    error_msg: str | None = None


class GetRewardRequest(BaseModel):
    """OpenRLHF's remote reward protocol. ``query`` is prompt + response; the response is what
    follows the prompt when the query starts with it. A label ``""`` (OpenRLHF's value for a sample
    without one) counts as no label."""

    model_config = ConfigDict(extra="ignore")

    query: list[str] = Field(..., description="full texts: prompt followed by response")
    prompts: list[str] | None = Field(None, description="the prompt of each query")
    labels: list[Any] | None = Field(None, description="the ground truth of each query")
    data_sources: list[str | dict[str, float] | None] | None = Field(
        None, description="the data source of each query (routes it in a composed judger)"
    )

    @model_validator(mode="after")
    def _same_lengths(self) -> GetRewardRequest:
        n = len(self.query)
        for name in ("prompts", "labels", "data_sources"):
            value = getattr(self, name)
            if value is not None and len(value) != n:
                raise ValueError(f"{name} has {len(value)} items but query has {n}; they must match")
        return self


class GetRewardResponse(BaseModel):
    """OpenRLHF's reply: one numeric reward per query, plus per-key numeric lists for logging."""

    rewards: list[float] = Field(
        ...,
        description="the score of each query; the server's failure_reward (default: the judger's "
        "lowest score) where judging failed",
    )
    scores: list[float] = Field(..., description="same as rewards (OpenRLHF uses it for filtering)")
    extra_logs: dict[str, list[float]] = Field(
        default_factory=dict,
        description="the server's log keys (default: acc), one number per query, 0.0 where missing or "
        "where judging failed; judge_failed: 1.0 where it failed. The same keys in every reply",
    )
    failures: list[JudgeFailureBody | None] = Field(
        default_factory=list, description="per query: null, or which judger failed, how and why"
    )


class HealthResponse(BaseModel):
    """Liveness, the judger served, and how busy the server is."""

    status: str
    judger: str
    in_flight: int
    max_concurrency: int
    uptime_s: float
