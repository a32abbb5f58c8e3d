"""JSON replies of the server, and the status and body each refused or crashed request gets.

Both ways into a protocol handler answer through here: the guard's direct path
(:class:`~judger.server.guard.GuardMiddleware`) and FastAPI's routes and exception handlers, so an
error reads the same whichever way the request came.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic_core import PydanticSerializationError, to_json

from judger.core.errors import RoutingError
from judger.server.body import BodyError

# error text a reply carries is cut to this many characters: a reply stays small whatever was sent
MAX_DETAIL = 2000


def encode(content: Any) -> bytes:
    """JSON bytes: pydantic-core's encoder first (rewards are JSON-native; it writes a 64-state reply
    in a third of json.dumps's time), FastAPI's encoder for what it cannot write (numpy scalars)."""
    try:
        return to_json(content)
    except (PydanticSerializationError, TypeError, ValueError):
        data = json.dumps(jsonable_encoder(content, custom_encoder={Exception: str}), ensure_ascii=False)
        return data.encode()


def json_reply(content: Any, status_code: int = 200) -> Response:
    return Response(encode(content), status_code=status_code, media_type="application/json")


def message_body(message: str) -> dict[str, str]:
    """The body of a refused request: ``detail`` (FastAPI's key) and ``message`` (OpenAI's)."""
    return {"detail": message, "message": message}


def error_reply(exc: Exception) -> tuple[int, dict[str, Any]]:
    """The status and body for an exception a protocol handler raised."""
    if isinstance(exc, BodyError):
        return exc.status, message_body(str(exc))
    if isinstance(exc, RoutingError):
        # the posted data_source names no branch: the request is wrong, not the server
        return 422, message_body(str(exc)[:MAX_DETAIL])
    # a judger built with on_error="raise", or a configuration error
    return 500, {"detail": f"judging raised {type(exc).__name__}: {exc}"[:MAX_DETAIL]}


async def exception_reply(request: Request, exc: Exception) -> Response:
    """FastAPI's handler for what a route raised: :func:`error_reply`'s status and body."""
    status, content = error_reply(exc)
    return json_reply(content, status)


async def invalid_reply(request: Request, exc: Exception) -> Response:
    """FastAPI's handler for a request it could not validate itself (a query parameter): 422 with
    the fields named, and none of what was sent."""
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    message = "; ".join(
        f"{'.'.join(str(p) for p in e.get('loc', ()) if p != 'body') or 'body'}: {e.get('msg')}"
        for e in errors[:10]
    )
    return json_reply(message_body(message), 422)


def install_error_handlers(app: FastAPI) -> None:
    for exc_type in (BodyError, RoutingError, Exception):
        app.add_exception_handler(exc_type, exception_reply)
    app.add_exception_handler(RequestValidationError, invalid_reply)
