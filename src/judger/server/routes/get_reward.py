"""``POST /get_reward``: OpenRLHF's remote reward protocol (its queries are read by
:mod:`judger.server.openrlhf`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response

from judger.core.outputs import finite_number
from judger.core.rollout import RolloutState
from judger.server.context import ServerContext, server_context
from judger.server.models import GetRewardRequest, GetRewardResponse
from judger.server.openapi import FAILURE_RESPONSES, request_body
from judger.server.openrlhf import judge_readable
from judger.server.replies import MAX_DETAIL, json_reply
from judger.server.requests import get_reward_states
from judger.server.routes.base import JudgeRoute

PATH = "/get_reward"
router = APIRouter()


async def handle(context: ServerContext, body: bytes, query: bytes) -> tuple[int, Any]:
    states = await context.parser.parse(body, lambda value: get_reward_states(value, context.reader))
    judged = await judge_readable(states, context.judge_many)
    failures = context.recorder.record_many(judged)
    if context.failure_reward is None and any(failures):
        timeout = all(f is None or f["kind"] == "timeout" for f in failures)
        detail = "; ".join(f"[{i}] {f['message']}" for i, f in enumerate(failures) if f)[:MAX_DETAIL]
        return 504 if timeout else 500, {"detail": detail, "failures": failures}
    return 200, _rewards(context, judged, failures)


def _rewards(
    context: ServerContext, judged: list[RolloutState], failures: list[dict[str, str] | None]
) -> dict[str, Any]:
    """The reply: every reward a number (``failure_reward`` for a failed sample), and the same
    ``extra_logs`` keys whatever the samples, as OpenRLHF merges them across a step."""
    failure_reward = context.failure_reward
    rewards: list[float] = []
    logs: dict[str, list[float]] = {key: [] for key in context.log_keys}
    flags: list[float] = []
    for state, failure in zip(judged, failures):
        reward_dict = state.reward if failure is None and state.reward else {}
        score = reward_dict.get("score")
        if failure is None and score is not None:
            rewards.append(float(score))
            if failure_reward is not None:
                failure_reward.watch(state, rewards[-1])
        else:  # failure_reward is set: handle() answered 5xx otherwise
            rewards.append(failure_reward.of(state) if failure_reward is not None else 0.0)
        flags.append(0.0 if failure is None else 1.0)
        for key, column in logs.items():
            # a number OpenRLHF can stack and average: not a NaN, nor an int no float holds (that
            # raised OverflowError and failed the whole request)
            value = finite_number(reward_dict.get(key))
            column.append(0.0 if value is None else value)
    logs["judge_failed"] = flags
    return {"rewards": rewards, "scores": list(rewards), "extra_logs": logs, "failures": failures}


@router.post(
    PATH,
    response_model=GetRewardResponse,
    responses=FAILURE_RESPONSES,
    openapi_extra=request_body(GetRewardRequest),
)
async def get_reward(
    request: Request, context: Annotated[ServerContext, Depends(server_context)]
) -> Response:
    """OpenRLHF: ``{"query", "prompts", "labels", "data_sources"}`` -> ``{"rewards", "scores",
    "extra_logs", "failures"}``. Every reward is a number: a failed sample gets ``failure_reward``
    (default: the judger's lowest score for it), ``extra_logs["judge_failed"]`` 1.0 and its failure
    in ``failures``. A label ``""`` (what OpenRLHF sends for a sample without one) is no label.
    ``data_sources`` routes each sample in a composed judger."""
    status, content = await handle(context, await request.body(), b"")
    return json_reply(content, status)


ROUTE = JudgeRoute(PATH, router, handle)
