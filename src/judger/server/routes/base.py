"""What a judging protocol module provides: its path, its router and its handler."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import APIRouter

from judger.server.context import Handler


@dataclass(frozen=True)
class JudgeRoute:
    """One judging protocol. ``router`` serves ``path`` through FastAPI (and documents it);
    ``handle(context, body, query)`` is the protocol itself, which the router's endpoint calls and
    which :class:`~judger.server.guard.GuardMiddleware` calls directly from the body it has read."""

    path: str
    router: APIRouter
    handle: Handler
