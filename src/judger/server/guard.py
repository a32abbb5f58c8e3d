"""The ASGI layer in front of ``judger serve``: bearer token, body-size limit, concurrency limit,
and request metrics. Pure ASGI (no per-request task or body copy) so it costs little per request."""

from __future__ import annotations

import hmac
import json
import time
from collections.abc import Awaitable, Callable, Collection, MutableMapping
from typing import Any

from judger.server.metrics import ServerMetrics

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class _BodyTooLarge(Exception):
    pass


async def _send_json(
    send: Send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]]
) -> None:
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


class GuardMiddleware:
    """Refuse what must not reach the judger, and time what does.

    - ``token``: every path except ``open_paths`` needs ``Authorization: Bearer <token>`` (401).
    - ``max_body_bytes``: larger bodies get 413, by Content-Length before reading, or while a
      chunked body streams in.
    - ``max_concurrency``: at most that many requests to ``limited_paths`` at once; the next one
      gets 503 with ``Retry-After`` at once instead of waiting in an unbounded queue.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        metrics: ServerMetrics,
        token: str | None,
        max_body_bytes: int,
        max_concurrency: int,
        retry_after: float,
        limited_paths: Collection[str],
        open_paths: Collection[str],
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.token = token.encode() if token else None
        self.max_body_bytes = max_body_bytes
        self.max_concurrency = max_concurrency
        self.retry_after = str(max(0, round(retry_after)))
        self.limited_paths = frozenset(limited_paths)
        self.open_paths = frozenset(open_paths)
        self.known_paths = self.limited_paths | self.open_paths | {"/metrics"}

    def _authorized(self, scope: Scope) -> bool:
        if self.token is None or scope["path"] in self.open_paths:
            return True
        for name, value in scope["headers"]:
            if name == b"authorization":
                scheme, _, credential = value.partition(b" ")
                return scheme.lower() == b"bearer" and hmac.compare_digest(credential.strip(), self.token)
        return False

    def _content_length(self, scope: Scope) -> int | None:
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    return int(value)
                except ValueError:
                    return None
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        endpoint = path if path in self.known_paths else "other"
        started = time.perf_counter()
        status = 500
        response_started = False

        async def send_tracked(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                status = message["status"]
                response_started = True
            await send(message)

        limited = path in self.limited_paths
        counted = False
        try:
            if not self._authorized(scope):
                self.metrics.reject("unauthorized")
                await _send_json(
                    send_tracked,
                    401,
                    {"detail": "missing or wrong bearer token (Authorization: Bearer <token>)"},
                    [(b"www-authenticate", b"Bearer")],
                )
                return
            length = self._content_length(scope)
            if length is not None and length > self.max_body_bytes:
                self.metrics.reject("too_large")
                await _send_json(send_tracked, 413, self._too_large(length), [(b"connection", b"close")])
                return
            if limited:
                if self.metrics.in_flight >= self.max_concurrency:
                    self.metrics.reject("overload")
                    detail = f"server busy: {self.max_concurrency} requests in flight; retry later"
                    await _send_json(
                        send_tracked, 503, {"detail": detail}, [(b"retry-after", self.retry_after)]
                    )
                    return
                self.metrics.in_flight += 1
                counted = True
            if length is None and scope["method"] in ("POST", "PUT", "PATCH"):
                receive = await self._buffered_receive(receive)
            await self.app(scope, receive, send_tracked)
        except _BodyTooLarge:
            self.metrics.reject("too_large")
            if not response_started:
                await _send_json(send_tracked, 413, self._too_large(None), [(b"connection", b"close")])
        finally:
            if counted:
                self.metrics.in_flight -= 1
            self.metrics.observe_request(endpoint, status, time.perf_counter() - started)

    def _too_large(self, length: int | None) -> dict[str, Any]:
        size = f"{length} bytes" if length is not None else "the body"
        return {"detail": f"request body too large: {size} > limit of {self.max_body_bytes} bytes"}

    async def _buffered_receive(self, receive: Receive) -> Receive:
        """Read a body of unknown length (chunked) up to the limit, then replay it to the app."""
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.max_body_bytes:
                raise _BodyTooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        replay: list[Message] = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

        async def receive_buffered() -> Message:
            return replay.pop() if replay else await receive()

        return receive_buffered
