"""``POST /reward``: the seeds' URL-handler protocol, so ``NativeJudger(reward_handler=
"http://host:port/reward")`` works unchanged."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response

from judger.server.context import ServerContext, server_context
from judger.server.models import ErrorBody, RewardRequest, RewardResponse
from judger.server.openapi import FAILURE_RESPONSES, request_body
from judger.server.replies import json_reply
from judger.server.requests import reward_state
from judger.server.routes.base import JudgeRoute
from judger.server.statuses import REWARD_FAILURES, failure_status

PATH = "/reward"
router = APIRouter()


async def handle(context: ServerContext, body: bytes, query: bytes) -> tuple[int, Any]:
    state = await context.batcher.judge(await context.parser.parse(body, reward_state))
    failure = context.recorder.record(state)
    if failure is not None:
        return failure_status(failure), {"detail": failure["message"], "judge_failure": failure}
    return 200, state.reward


@router.post(
    PATH,
    response_model=RewardResponse,
    responses={
        **{k: v for k, v in FAILURE_RESPONSES.items() if k != 500},
        **{k: {"model": ErrorBody, "description": d} for k, d in REWARD_FAILURES.items()},
    },
    openapi_extra=request_body(RewardRequest),
)
async def reward(request: Request, context: Annotated[ServerContext, Depends(server_context)]) -> Response:
    """Judge one sample: ``{"response", "label", "extra_info", "data_source"}`` -> the reward dict.

    A sample the judger fails on answers 422 (504 for a timeout, 503 when the server rather than
    the sample failed) with the failure, never a made-up score; clients do not retry a 422.
    ``extra_info["question"]`` (or ``["prompt"]``), when present, becomes the user message
    (LLM verifiers read the question from it). Concurrent requests are judged together as one
    batch.
    """
    status, content = await handle(context, await request.body(), b"")
    return json_reply(content, status)


ROUTE = JudgeRoute(PATH, router, handle)
