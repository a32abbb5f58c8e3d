"""The ASGI layer in front of ``judger serve``: bearer token, body-size limit, body-read deadline,
per-client and global concurrency limits, and request metrics. Pure ASGI (no per-request task) so it
costs little per request."""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Collection, Mapping, MutableMapping
from typing import Any

from judger.core.deadlines import deadline
from judger.core.errors import RoutingError
from judger.server.body import BodyError
from judger.server.metrics import ServerMetrics

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Handler = Callable[[bytes, bytes], Awaitable[tuple[int, Any]]]
"""``handler(body, query_string) -> (status, JSON content)``."""


class _BodyTooLarge(Exception):
    pass


class _ClientGone(Exception):
    pass


class _BodyTimeout(Exception):
    pass


async def _within(seconds: float, awaitable: Awaitable[bytes]) -> bytes:
    try:
        async with deadline(seconds):  # asyncio.timeout, or core's task-free fallback on 3.10
            return await awaitable
    except (TimeoutError, asyncio.TimeoutError):
        raise _BodyTimeout from None


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
    - ``body_timeout``: a request to ``limited_paths`` must deliver its whole body within that
      many seconds (408 and the connection closed otherwise). The body is read *before* the request
      takes a judging slot, so clients that trickle bytes hold no slot, and not for long.
    - ``max_client_requests``: requests to ``limited_paths`` one client address may have open at
      once, body reading included (429 beyond): one client cannot hold every connection.
    - ``max_concurrency``: at most that many requests to ``limited_paths`` judged at once; the next
      one gets 503 with ``Retry-After`` at once instead of waiting in an unbounded queue.
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
        body_timeout: float = 30.0,
        max_client_requests: int | None = None,
        handlers: Mapping[str, Handler] | None = None,
        encode: Callable[[Any], bytes] | None = None,
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.token = token.encode() if token else None
        self.max_body_bytes = max_body_bytes
        self.max_concurrency = max_concurrency
        self.retry_after = str(max(0, round(retry_after))).encode()
        self.limited_paths = frozenset(limited_paths)
        self.open_paths = frozenset(open_paths)
        self.known_paths = self.limited_paths | self.open_paths | {"/metrics"}
        self.body_timeout = body_timeout
        self.max_client_requests = max_client_requests or max(1, max_concurrency)
        self.per_client: defaultdict[str, int] = defaultdict(int)
        # POST to these paths is answered here from the body already read, without the framework's
        # routing, request and response objects (most of the cost of a cheap judge request); the
        # framework keeps the same endpoints for the docs and for everything else
        self.handlers = dict(handlers or {})
        self.encode = encode or (lambda content: json.dumps(content).encode())

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
        client: str | None = None
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
                peer = scope.get("client")
                key = str(peer[0]) if peer else ""
                if self.per_client[key] >= self.max_client_requests:
                    self.metrics.reject("client_limit")
                    detail = f"this client has {self.max_client_requests} requests open; retry later"
                    await _send_json(
                        send_tracked, 429, {"detail": detail}, [(b"retry-after", self.retry_after)]
                    )
                    return
                self.per_client[key] += 1
                client = key
                body = await _within(self.body_timeout, self._read_body(receive))
                if self.metrics.in_flight >= self.max_concurrency:
                    self.metrics.reject("overload")
                    detail = f"server busy: {self.max_concurrency} requests in flight; retry later"
                    await _send_json(
                        send_tracked, 503, {"detail": detail}, [(b"retry-after", self.retry_after)]
                    )
                    return
                self.metrics.in_flight += 1
                counted = True
                handler = self.handlers.get(path) if scope["method"] == "POST" else None
                if handler is not None:
                    await self._answer(handler, body, scope, send_tracked)
                    return
                receive = _replay(body, receive)
            elif length is None and scope["method"] in ("POST", "PUT", "PATCH"):
                body = await _within(self.body_timeout, self._read_body(receive))
                receive = _replay(body, receive)
            await self.app(scope, receive, send_tracked)
        except _BodyTooLarge:
            self.metrics.reject("too_large")
            if not response_started:
                await _send_json(send_tracked, 413, self._too_large(None), [(b"connection", b"close")])
        except _BodyTimeout:
            self.metrics.reject("body_timeout")
            detail = f"request body not received within {self.body_timeout:g} s"
            await _send_json(send_tracked, 408, {"detail": detail}, [(b"connection", b"close")])
        except _ClientGone:
            status = 499  # nginx's "client closed request": nobody to answer
        finally:
            if counted:
                self.metrics.in_flight -= 1
            if client is not None:
                left = self.per_client[client] - 1
                if left:
                    self.per_client[client] = left
                else:
                    del self.per_client[client]
            self.metrics.observe_request(endpoint, status, time.perf_counter() - started)

    async def _answer(self, handler: Handler, body: bytes, scope: Scope, send: Send) -> None:
        try:
            status, content = await handler(body, scope.get("query_string", b""))
        except BodyError as exc:
            status, content = exc.status, {"detail": str(exc), "message": str(exc)}
        except RoutingError as exc:  # the client's data_source names no branch: its request is wrong
            status, content = 422, {"detail": str(exc)[:2000], "message": str(exc)[:2000]}
        except Exception as exc:  # a judger with on_error="raise", a configuration error
            status, content = 500, {"detail": f"judging raised {type(exc).__name__}: {exc}"[:2000]}
        data = self.encode(content)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(data)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": data})

    def _too_large(self, length: int | None) -> dict[str, Any]:
        size = f"{length} bytes" if length is not None else "the body"
        return {"detail": f"request body too large: {size} > limit of {self.max_body_bytes} bytes"}

    async def _read_body(self, receive: Receive) -> bytes:
        """The whole body, up to the size limit (a chunked body's length is known only at its end)."""
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                raise _ClientGone
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.max_body_bytes:
                raise _BodyTooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the app the body already read, then waits on the real one."""
    replay: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive_buffered() -> Message:
        return replay.pop() if replay else await receive()

    return receive_buffered
