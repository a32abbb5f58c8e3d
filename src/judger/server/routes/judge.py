"""``POST /judge``: RolloutStates in (one, or a list), their rewards out."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Depends, Request, Response

from judger.core.rollout import RolloutState, Status
from judger.server.body import BodyError, echo
from judger.server.context import ServerContext, server_context
from judger.server.models import JudgedState
from judger.server.openapi import FAILURE_RESPONSES, request_body
from judger.server.parsing import INLINE_PARSE_BYTES
from judger.server.replies import json_reply
from judger.server.requests import judge_items_json, judge_states
from judger.server.routes.base import JudgeRoute
from judger.server.states import twin

PATH = "/judge"
router = APIRouter()


def flag(query: bytes, name: str) -> bool:
    """A boolean query parameter, read as FastAPI reads one; any other value is refused (422), not
    taken as false."""
    if not query:
        return False
    values = parse_qs(query.decode("latin-1"), keep_blank_values=True).get(name)
    if not values:
        return False
    value = values[-1].lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise BodyError(f"{name}: expected a boolean (true or false), got {echo(values[-1])}")


async def handle(context: ServerContext, body: bytes, query: bytes) -> tuple[int, Any]:
    full = flag(query, "full")
    direct = judge_items_json(body, context.limits) if len(body) <= INLINE_PARSE_BYTES else None
    if direct is not None:
        items, many = direct
        field_judger = context.field_judger
        if field_judger is not None and not full and len(items) > 1 and twin().usable:
            # an inline preset scores the validated fields: no RolloutState is built
            out = context.recorder.record_outputs(field_judger.score_fields(items))
            return 200, out if many else out[0]
        states = twin().adopt_all(items)
    else:
        states, many = await context.parser.parse(body, judge_states)
    if len(states) == 1:
        judged = [await context.batcher.judge(states[0])]
    else:
        judged = await context.judger.batch_judge(states) if states else []
    context.recorder.record_many(judged)
    out = [s.model_dump(mode="json") for s in judged] if full else _light(judged)
    return 200, out if many else out[0]


def _light(judged: list[RolloutState]) -> list[dict[str, Any]]:
    failed = Status.FAILED
    return [
        {
            "reward": s.reward,
            "status": "failed" if s.status is failed else "completed",
            "error_msg": s.error_msg,
        }
        for s in judged
    ]


@router.post(
    PATH,
    response_model=JudgedState | list[JudgedState],
    responses={k: v for k, v in FAILURE_RESPONSES.items() if k not in (500, 504)},
    openapi_extra=request_body(RolloutState),
)
async def judge(
    request: Request, context: Annotated[ServerContext, Depends(server_context)], full: bool = False
) -> Response:
    """Judge one RolloutState or a list of them. The reply has, per state, ``reward``,
    ``status`` and ``error_msg`` (``?full=true``: the whole judged states). Failures come back
    as ``status="failed"`` with ``error_msg`` and never fail the request. A posted ``reward``,
    ``error_msg``, ``extra_fields.judge_failure`` or a status other than init/completed is
    refused (422): those are the judger's to write."""
    status, content = await handle(context, await request.body(), b"full=true" if full else b"")
    return json_reply(content, status)


ROUTE = JudgeRoute(PATH, router, handle)
