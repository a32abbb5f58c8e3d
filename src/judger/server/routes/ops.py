"""The operations endpoints: ``GET /health`` (liveness) and ``GET /metrics`` (Prometheus)."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import PlainTextResponse, Response

from judger.server.context import ServerContext, server_context
from judger.server.models import HealthResponse
from judger.server.replies import json_reply

PROMETHEUS_TYPE = "text/plain; version=0.0.4; charset=utf-8"
router = APIRouter()


@router.get("/health", response_model=HealthResponse)
async def health(context: Annotated[ServerContext, Depends(server_context)]) -> Response:
    """Liveness: always answers (no token, no concurrency limit)."""
    return json_reply(
        {
            "status": "ok",
            "judger": context.name,
            "in_flight": context.metrics.in_flight,
            "max_concurrency": context.max_concurrency,
            "uptime_s": round(time.time() - context.metrics.started, 3),
        }
    )


@router.get("/metrics", response_class=PlainTextResponse)
async def prometheus(context: Annotated[ServerContext, Depends(server_context)]) -> PlainTextResponse:
    """Prometheus text format: requests, latency, rejections, samples by outcome, verdicts."""
    return PlainTextResponse(context.metrics.render(), media_type=PROMETHEUS_TYPE)
