"""The ASGI layer in front of ``judger serve``: bearer token, body-size limit, body-read deadline,
per-client and global concurrency limits, and request metrics. Pure ASGI (no per-request task) so it
costs little per request.

These guards are middleware, not FastAPI dependencies, because they must act before the body is
read: a dependency runs only once routing is done and, for a route that reads its body, would let
an unauthenticated, oversized or trickling client cost a body read and a slot first; and because
the judging protocols are answered here, from the body already read (see ``handlers``), where no
dependency would run at all. Being in front of the router, the token check also covers every
route, a new one included, unless its path is listed in ``open_paths``."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Collection, Mapping, MutableMapping
from typing import Any

from judger.core.deadlines import wait_for
from judger.server.auth import CHALLENGE, UNAUTHORIZED, BearerToken
from judger.server.limits import default_client_body_bytes
from judger.server.metrics import ServerMetrics
from judger.server.replies import error_reply

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Handler = Callable[[bytes, bytes], Awaitable[tuple[int, Any]]]
"""``handler(body, query_string) -> (status, JSON content)``."""


class _BodyUnread(Exception):
    """The body could not be read: too large, too slow, or its client went away."""


class _BodyTooLarge(_BodyUnread):
    pass


class _ClientGone(_BodyUnread):
    pass


class _BodyTimeout(_BodyUnread):
    pass


class _ClientBodiesFull(_BodyUnread):
    """The client's bodies in flight would pass its share of memory."""


async def _within(seconds: float, awaitable: Awaitable[bytes]) -> bytes:
    try:
        return await wait_for(awaitable, seconds)
    except TimeoutError:
        raise _BodyTimeout from None


_CLOSE = [(b"connection", b"close")]


class _TrackedSend:
    """``send``, noting the status the request was answered with (for the request metrics)."""

    __slots__ = ("send", "started", "status")

    def __init__(self, send: Send) -> None:
        self.send = send
        self.status = 500
        self.started = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.started = True
        await self.send(message)


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
    - ``max_client_body_bytes``: bytes of those requests' bodies one client address may have in
      memory at once, read or being judged (429 and the connection closed beyond; default: its
      share of memory, :func:`judger.server.limits.default_client_body_bytes`).
    - a request to any other path that carries a body (a Content-Length above 0, or chunked) is
      answered 413 and its connection closed, unread: no other route takes a body.
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
        max_client_body_bytes: int | None = None,
        handlers: Mapping[str, Handler] | None = None,
        encode: Callable[[Any], bytes] | None = None,
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.auth = BearerToken(token, open_paths)
        self.max_body_bytes = max_body_bytes
        self.max_concurrency = max_concurrency
        self.retry_after = str(max(0, round(retry_after))).encode()
        self.limited_paths = frozenset(limited_paths)
        self.open_paths = frozenset(open_paths)
        self.known_paths = self.limited_paths | self.open_paths | {"/metrics"}
        self.body_timeout = body_timeout
        self.max_client_requests = max_client_requests or max(1, max_concurrency)
        self.per_client: defaultdict[str, int] = defaultdict(int)
        self.max_client_body_bytes = max_client_body_bytes or default_client_body_bytes(max_body_bytes)
        self.client_bytes: defaultdict[str, int] = defaultdict(int)  # bodies held, per client
        # POST to these paths is answered here from the body already read, without the framework's
        # routing, request and response objects (most of the cost of a cheap judge request); the
        # framework keeps the same endpoints for the docs and for everything else
        self.handlers = dict(handlers or {})
        self.encode = encode or (lambda content: json.dumps(content).encode())

    @staticmethod
    def _body_headers(scope: Scope) -> tuple[int | None, bool]:
        """The Content-Length (None: absent or unreadable) and whether a Transfer-Encoding is set."""
        length, encoded = None, False
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    length = None
            elif name == b"transfer-encoding":
                encoded = True
        return length, encoded

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        started = time.perf_counter()
        tracked = _TrackedSend(send)
        try:
            await self._guarded(scope, receive, tracked)
        finally:
            endpoint = path if path in self.known_paths else "other"
            self.metrics.observe_request(endpoint, tracked.status, time.perf_counter() - started)

    async def _guarded(self, scope: Scope, receive: Receive, send: _TrackedSend) -> None:
        if not self.auth.authorized(scope):
            self.metrics.reject("unauthorized")
            await _send_json(send, 401, {"detail": UNAUTHORIZED}, [CHALLENGE])
            return
        length, encoded = self._body_headers(scope)
        if length is not None and length > self.max_body_bytes:
            self.metrics.reject("too_large")
            await _send_json(send, 413, self._too_large(length), _CLOSE)
            return
        if scope["path"] in self.limited_paths:
            await self._limited(scope, receive, send)
            return
        if encoded or (length or 0) > 0:
            # no other route takes a body: refused unread, and the connection closed, rather than
            # held in memory until it ends (a chunked body need never end)
            self.metrics.reject("body_not_taken")
            detail = f"{scope['path']} takes no request body"
            await _send_json(send, 413, {"detail": detail}, _CLOSE)
            return
        await self.app(scope, receive, send)

    async def _limited(self, scope: Scope, receive: Receive, send: _TrackedSend) -> None:
        """A judging request: a per-client slot while its body is read, then a judging slot."""
        peer = scope.get("client")
        client = str(peer[0]) if peer else ""
        if self.per_client[client] >= self.max_client_requests:
            self.metrics.reject("client_limit")
            detail = f"this client has {self.max_client_requests} requests open; retry later"
            await _send_json(send, 429, {"detail": detail}, [(b"retry-after", self.retry_after)])
            return
        self.per_client[client] += 1
        held = [0]  # bytes of this body counted against the client
        try:
            body = await _within(self.body_timeout, self._read_body(receive, client, held))
            await self._judged(body, scope, receive, send)
        except _BodyUnread as exc:
            await self._unread(exc, send)
        finally:
            _release(self.per_client, client, 1)
            _release(self.client_bytes, client, held[0])

    async def _judged(self, body: bytes, scope: Scope, receive: Receive, send: _TrackedSend) -> None:
        if self.metrics.in_flight >= self.max_concurrency:
            self.metrics.reject("overload")
            detail = f"server busy: {self.max_concurrency} requests in flight; retry later"
            await _send_json(send, 503, {"detail": detail}, [(b"retry-after", self.retry_after)])
            return
        self.metrics.in_flight += 1
        try:
            handler = self.handlers.get(scope["path"]) if scope["method"] == "POST" else None
            if handler is not None:
                await self._answer(handler, body, scope, send)
            else:
                await self.app(scope, _replay(body, receive), send)
        finally:
            self.metrics.in_flight -= 1

    async def _unread(self, exc: _BodyUnread, send: _TrackedSend) -> None:
        if isinstance(exc, _BodyTooLarge):
            self.metrics.reject("too_large")
            if not send.started:
                await _send_json(send, 413, self._too_large(None), _CLOSE)
        elif isinstance(exc, _BodyTimeout):
            self.metrics.reject("body_timeout")
            detail = f"request body not received within {self.body_timeout:g} s"
            await _send_json(send, 408, {"detail": detail}, _CLOSE)
        elif isinstance(exc, _ClientBodiesFull):
            self.metrics.reject("client_bytes")
            detail = f"this client has {self.max_client_body_bytes} bytes of requests in flight; retry later"
            await _send_json(send, 429, {"detail": detail}, [(b"retry-after", self.retry_after), *_CLOSE])
        else:
            send.status = 499  # nginx's "client closed request": nobody to answer

    async def _answer(self, handler: Handler, body: bytes, scope: Scope, send: Send) -> None:
        try:
            status, content = await handler(body, scope.get("query_string", b""))
        except Exception as exc:  # the same replies as the app's exception handlers give
            status, content = error_reply(exc)
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

    async def _read_body(self, receive: Receive, client: str, held: list[int]) -> bytes:
        """The whole body, up to the size limit (a chunked body's length is known only at its end),
        each chunk counted against the client's share (``held[0]``: what this body counts)."""
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
            if self.client_bytes[client] + len(chunk) > self.max_client_body_bytes:
                raise _ClientBodiesFull
            self.client_bytes[client] += len(chunk)
            held[0] += len(chunk)
            chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _release(counts: defaultdict[str, int], client: str, amount: int) -> None:
    left = counts[client] - amount
    if left > 0:
        counts[client] = left
    else:
        del counts[client]


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the app the body already read, then waits on the real one."""
    replay: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive_buffered() -> Message:
        return replay.pop() if replay else await receive()

    return receive_buffered
