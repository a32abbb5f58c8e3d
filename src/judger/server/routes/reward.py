"""``POST /reward``: the seeds' URL-handler protocol, so ``NativeJudger(reward_handler=
"http://host:port/reward")`` works unchanged."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response

from judger.core.failure_reward import LOWEST, FailureReward
from judger.core.rollout import RolloutState
from judger.server.context import ServerContext, server_context
from judger.server.models import ErrorBody, RewardRequest, RewardResponse
from judger.server.openapi import FAILURE_RESPONSES, request_body
from judger.server.replies import json_reply
from judger.server.requests import reward_request
from judger.server.routes.base import JudgeRoute
from judger.server.statuses import REWARD_FAILURES, failure_status

PATH = "/reward"
router = APIRouter()


async def handle(context: ServerContext, body: bytes, query: bytes) -> tuple[int, Any]:
    state, slime = await context.parser.parse(body, reward_request)
    state = await context.batcher.judge(state)
    failure = context.recorder.record(state)
    if slime:
        return 200, slime_reward(context, state, failure)
    if failure is not None:
        return failure_status(failure), {"detail": failure["message"], "judge_failure": failure}
    return 200, state.reward


def slime_reward(
    context: ServerContext, state: RolloutState, failure: dict[str, str] | None
) -> dict[str, Any]:
    """slime's reply: it retries any non-200 and then ends the rollout, so a sample the judger fails
    on answers 200 too, with the failure reward (default the lowest score), ``judge_failed`` 1.0
    and the failure; a judged one its reward dict with ``judge_failed`` 0.0."""
    failure_reward = context.failure_reward or FailureReward(LOWEST, context.judger, "failure_reward")
    if failure is None and state.reward is not None:
        failure_reward.watch(state, float(state.reward["score"]))
        return {**state.reward, "judge_failed": 0.0}
    return {"score": failure_reward.of(state), "judge_failed": 1.0, "judge_failure": failure}


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

    slime's ``remote_rm`` body, ``{"prompt", "response", "label"}``, is taken too: its reply is the
    reward dict plus ``judge_failed`` (slime reads it with ``--reward-key score``), and a sample the
    judger fails on answers 200 with the failure reward (default: the judger's lowest score),
    ``judge_failed`` 1.0 and ``judge_failure``, as slime ends the rollout on any other status.
    Otherwise a sample the judger fails on answers 422 (504 for a timeout, 503 when the server rather than
    the sample failed) with the failure, never a made-up score; clients do not retry a 422.
    ``extra_info["question"]`` (or ``["prompt"]``), when present, becomes the user message
    (LLM verifiers read the question from it). Concurrent requests are judged together as one
    batch.
    """
    status, content = await handle(context, await request.body(), b"")
    return json_reply(content, status)


ROUTE = JudgeRoute(PATH, router, handle)
