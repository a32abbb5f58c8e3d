"""The FastAPI app behind ``judger serve``: any judger, reachable from any trainer over HTTP.

Endpoints: ``POST /reward`` (the seeds' URL-handler protocol, so ``NativeJudger(reward_handler=
"http://host:port/reward")`` works unchanged), ``POST /judge`` (RolloutState in, judged RolloutState
out), ``POST /get_reward`` (OpenRLHF's remote reward protocol), ``GET /health``, ``GET /metrics``
(Prometheus). :class:`~judger.server.guard.GuardMiddleware` adds the token, size and concurrency
limits.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Body, FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse

from judger.core.judger import BaseJudger
from judger.core.rollout import RolloutState, Status
from judger.judgers.config import ComposedJudgerConfig, JudgerConfig, build_judger
from judger.server.guard import GuardMiddleware
from judger.server.metrics import ServerMetrics
from judger.server.models import (
    ErrorBody,
    GetRewardRequest,
    GetRewardResponse,
    HealthResponse,
    RewardRequest,
    RewardResponse,
)

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_CONCURRENCY = 512
JUDGE_PATHS = ("/reward", "/judge", "/get_reward")
OPEN_PATHS = ("/health", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json")
PROMETHEUS_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _field_path(loc: Any) -> str:
    parts = [str(p) for p in (loc or ()) if p != "body"]
    return ".".join(parts) or "body"


def _failure_of(state: RolloutState, judger_name: str) -> dict[str, str] | None:
    if state.status is not Status.FAILED:
        return None
    info = state.extra_fields.get("judge_failure") or {}
    return {
        "judger": str(info.get("judger", judger_name)),
        "kind": str(info.get("kind", "error")),
        "message": state.error_msg or "judging failed",
    }


class _Recorder:
    """Counts judged samples into the metrics."""

    def __init__(self, metrics: ServerMetrics, judger_name: str) -> None:
        self.metrics = metrics
        self.judger_name = judger_name

    def record(self, state: RolloutState) -> dict[str, str] | None:
        failure = _failure_of(state, self.judger_name)
        if failure is not None:
            self.metrics.sample(failure["judger"], failure["kind"])
        else:
            verdict = state.reward.get("verdict") if state.reward else None
            self.metrics.sample(self.judger_name, "ok", verdict)
        return failure


def create_app(
    judger: BaseJudger | JudgerConfig | ComposedJudgerConfig,
    *,
    token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    retry_after: float = 1.0,
    close_judger: bool = True,
) -> FastAPI:
    """Serve ``judger`` (a built judger, or a config built here) over HTTP.

    ``token``: required as ``Authorization: Bearer <token>`` on every endpoint but /health and the
    docs. ``max_body_bytes``: larger requests get 413. ``max_concurrency``: judge requests served at
    once; more get 503 with ``Retry-After: retry_after``. The judger is closed when the server
    shuts down unless ``close_judger`` is False.
    """
    if max_body_bytes < 1 or max_concurrency < 1:
        raise ValueError("max_body_bytes and max_concurrency must be >= 1")
    live = judger if isinstance(judger, BaseJudger) else build_judger(judger)
    name = live.get_judger_name()
    metrics = ServerMetrics()
    recorder = _Recorder(metrics, name)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        if close_judger:
            await live.aclose()

    app = FastAPI(
        title="judger",
        summary=f"Rewards from judger {name!r}",
        description=(
            "Score LLM rollouts over HTTP. `/reward` speaks the URL-handler protocol of "
            "`NativeJudger`, `/judge` takes RolloutState objects, `/get_reward` speaks OpenRLHF's "
            "remote reward protocol."
        ),
        lifespan=lifespan,
    )
    app.state.judger = live
    app.state.metrics = metrics

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        malformed = any(e.get("type") == "json_invalid" for e in errors)
        message = "; ".join(f"{_field_path(e.get('loc'))}: {e.get('msg')}" for e in errors)
        body = {"detail": jsonable_encoder(errors, custom_encoder={Exception: str}), "message": message}
        return JSONResponse(body, status_code=400 if malformed else 422)

    failure_responses: dict[int | str, dict[str, Any]] = {
        500: {"model": ErrorBody, "description": "the judger failed on this sample"},
        504: {"model": ErrorBody, "description": "the judger timed out on this sample"},
        401: {"model": ErrorBody, "description": "missing or wrong bearer token"},
        413: {"model": ErrorBody, "description": "request body too large"},
        503: {"model": ErrorBody, "description": "too many requests in flight; retry after Retry-After s"},
    }

    @app.post("/reward", response_model=RewardResponse, responses=failure_responses)
    async def reward(request: RewardRequest) -> Any:
        """Judge one sample: ``{"response", "label", "extra_info"}`` -> the reward dict.

        A sample the judger fails on answers 500 (504 for a timeout) with the failure, never a
        made-up score. ``extra_info["question"]`` (or ``["prompt"]``), when present, becomes the
        user message (LLM verifiers read the question from it).
        """
        question = request.extra_info.get("question", request.extra_info.get("prompt"))
        state = RolloutState(
            message=[{"role": "user", "content": question}] if isinstance(question, str) else [],
            response=request.response,
            reward_model={"ground_truth": request.label},
            data_source=request.data_source,
            status=Status.COMPLETED,
            extra_fields={"extra_info": request.extra_info} if request.extra_info else {},
        )
        state = await live.judge(state)
        failure = recorder.record(state)
        if failure is not None:
            status = 504 if failure["kind"] == "timeout" else 500
            return JSONResponse({"detail": failure["message"], "judge_failure": failure}, status_code=status)
        return JSONResponse(jsonable_encoder(state.reward))

    @app.post(
        "/judge",
        response_model=RolloutState | list[RolloutState],
        responses={k: v for k, v in failure_responses.items() if k not in (500, 504)},
    )
    async def judge(states: RolloutState | list[RolloutState] = Body(...)) -> Any:
        """Judge one RolloutState or a list of them; failures come back as ``status="failed"`` with
        ``error_msg``, in place, and never fail the request."""
        batch = states if isinstance(states, list) else [states]
        judged = await live.batch_judge(batch) if len(batch) > 1 else [await live.judge(batch[0])]
        for state in judged:
            recorder.record(state)
        out = [s.model_dump(mode="json") for s in judged]
        return JSONResponse(out if isinstance(states, list) else out[0])

    @app.post("/get_reward", response_model=GetRewardResponse, responses=failure_responses)
    async def get_reward(request: GetRewardRequest) -> Any:
        """OpenRLHF: ``{"query", "prompts", "labels"}`` -> ``{"rewards", "scores", "extra_logs"}``.
        A sample whose judging failed has reward null."""
        prompts = request.prompts or [""] * len(request.query)
        labels = request.labels or [None] * len(request.query)
        states = []
        for query, prompt, label in zip(request.query, prompts, labels):
            response = query[len(prompt) :] if prompt and query.startswith(prompt) else query
            states.append(
                RolloutState(
                    message=[{"role": "user", "content": prompt}] if prompt else [],
                    response=response,
                    reward_model={"ground_truth": label},
                    status=Status.COMPLETED,
                )
            )
        judged = await live.batch_judge(states) if states else []
        rewards: list[float | None] = []
        logs: dict[str, list[float | None]] = {}
        for i, state in enumerate(judged):
            failed = recorder.record(state) is not None
            reward_dict = {} if failed or not state.reward else state.reward
            rewards.append(float(reward_dict["score"]) if "score" in reward_dict else None)
            for key, value in reward_dict.items():
                if key != "score" and isinstance(value, (int, float)):
                    logs.setdefault(key, [None] * len(judged))[i] = float(value)
        return JSONResponse({"rewards": rewards, "scores": list(rewards), "extra_logs": logs})

    @app.get("/health", response_model=HealthResponse)
    async def health() -> Any:
        """Liveness: always answers (no token, no concurrency limit)."""
        return JSONResponse(
            {
                "status": "ok",
                "judger": name,
                "in_flight": metrics.in_flight,
                "max_concurrency": max_concurrency,
                "uptime_s": round(time.time() - metrics.started, 3),
            }
        )

    @app.get("/metrics", response_class=PlainTextResponse)
    async def prometheus() -> PlainTextResponse:
        """Prometheus text format: requests, latency, rejections, samples by outcome, verdicts."""
        return PlainTextResponse(metrics.render(), media_type=PROMETHEUS_TYPE)

    app.add_middleware(
        GuardMiddleware,  # type: ignore[arg-type]
        metrics=metrics,
        token=token,
        max_body_bytes=max_body_bytes,
        max_concurrency=max_concurrency,
        retry_after=retry_after,
        limited_paths=JUDGE_PATHS,
        open_paths=OPEN_PATHS,
    )
    return app
