"""Connection limits for ``judger serve`` below the ASGI app: a header-read deadline, a cap on a
request's header bytes, and caps on open connections, overall and per client address.

uvicorn closes idle keep-alive connections, but a connection that has sent part of a request's
headers (or nothing since it opened) is held forever, each one an fd: enough of them exhaust the
process's fd limit and then nothing, ``/health`` included, is accepted. The protocols here are
uvicorn's own, with three additions:

- a request's headers must arrive within ``header_timeout`` seconds of the moment the connection
  starts waiting for them (when it opens, and after each response); past it the connection closes;
- at most ``max_connections`` connections are open; a new one past the cap closes the connection
  that has waited longest for headers (an idle or slow one, never one with a request in flight),
  or, when every open connection has a request in flight, is itself answered 503 and closed;
- at most ``max_client_connections`` from one client address, the same way (429);
- a request's line and headers may take at most ``max_header_bytes``: past it the request is
  answered 431 and the connection closed. httptools, uvicorn's fast parser, has no such limit (96 MB
  of headers to ``/health`` were read and answered), so it is counted here as the bytes arrive;
  h11 is given the same bound (``h11_max_incomplete_event_size``).

The caps count transport peers (a proxy in front is one client). Limits reach ``--workers``
processes through the environment, as the served spec does.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import weakref
from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from judger.server.limits import DEFAULT_MAX_HEADER_BYTES, client_connections_for_memory

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # pragma: no cover - httptools is optional in uvicorn
    HttpToolsProtocol = None  # type: ignore[assignment,misc]

LIMITS_ENV = "JUDGER_SERVE_CONNECTION_LIMITS"
DEFAULT_HEADER_TIMEOUT = 10.0
# fds kept for the judger itself (worker pipes, sandboxes, its own HTTP clients, logs)
MIN_RESERVED_FDS = 64
# an open-files limit this high is as good as none: the cap stays at this many
MAX_DEFAULT_CONNECTIONS = 65536


@dataclass(frozen=True)
class ConnectionLimits:
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    max_connections: int = 1024
    max_client_connections: int = 1024
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES

    def __post_init__(self) -> None:
        if not self.header_timeout > 0:
            raise ValueError(f"header_timeout must be > 0, got {self.header_timeout}")
        if self.max_connections < 1 or self.max_client_connections < 1 or self.max_header_bytes < 1:
            raise ValueError("max_connections, max_client_connections and max_header_bytes must be >= 1")


def default_max_connections() -> int:
    """Open connections the process's open-files limit allows, with fds kept back for the judger."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft > MAX_DEFAULT_CONNECTIONS:
        return MAX_DEFAULT_CONNECTIONS
    return max(1, soft - max(MIN_RESERVED_FDS, soft // 4))


def default_max_client_connections(
    max_connections: int, max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES, memory: int | None = None
) -> int:
    """One client may hold all connections but a few, so another client can always get in, and no
    more than keep its unfinished headers within its share of memory (:mod:`judger.server.limits`)."""
    by_fds = max(1, max_connections - max(1, min(MIN_RESERVED_FDS, max_connections // 4)))
    return min(by_fds, client_connections_for_memory(max_header_bytes, memory))


_limits: ConnectionLimits | None = None


def configure(limits: ConnectionLimits) -> str:
    """Set the limits of this process and of the ``--workers`` it starts; returns the protocol's
    import string for ``uvicorn.run(http=...)``."""
    global _limits
    _limits = limits
    os.environ[LIMITS_ENV] = json.dumps(asdict(limits))
    name = "GuardedHttpToolsProtocol" if HttpToolsProtocol is not None else "GuardedH11Protocol"
    return f"{__name__}:{name}"


def current_limits() -> ConnectionLimits:
    global _limits
    if _limits is None:
        raw = os.environ.get(LIMITS_ENV)
        _limits = ConnectionLimits(**json.loads(raw)) if raw else ConnectionLimits()
    return _limits


class _Registry:
    """The open connections of one server, oldest waiter first, overall and per client."""

    def __init__(self) -> None:
        self.all: OrderedDict[Any, None] = OrderedDict()
        self.by_client: dict[str, OrderedDict[Any, None]] = {}

    def add(self, conn: Any, client: str) -> None:
        self.all[conn] = None
        self.by_client.setdefault(client, OrderedDict())[conn] = None

    def remove(self, conn: Any, client: str) -> None:
        self.all.pop(conn, None)
        mine = self.by_client.get(client)
        if mine is not None:
            mine.pop(conn, None)
            if not mine:
                del self.by_client[client]

    def waiting_again(self, conn: Any, client: str) -> None:
        """``conn`` waits for a request's headers from now: it is the newest waiter."""
        if conn in self.all:
            self.all.move_to_end(conn)
            self.by_client[client].move_to_end(conn)

    @staticmethod
    def evict_oldest_waiter(conns: OrderedDict[Any, None]) -> bool:
        for conn in conns:
            if conn.waiting_for_headers():
                conn.transport.close()  # connection_lost unregisters it
                conn.unregister()
                return True
        return False


_registries: weakref.WeakKeyDictionary[Any, _Registry] = weakref.WeakKeyDictionary()


class _Guard:
    """The additions to a uvicorn HTTP protocol (mixed in before it)."""

    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    client: tuple[str, int] | None
    server_state: Any
    cycle: Any

    _guard_limits: ConnectionLimits
    _guard_registry: _Registry | None = None
    _guard_timer: asyncio.TimerHandle | None = None
    _guard_awaiting: Any = None
    _guard_client: str = ""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        limits = self._guard_limits = current_limits()
        registry = _registries.get(self.server_state)
        if registry is None:
            registry = _registries[self.server_state] = _Registry()
        client = self._guard_client = self.client[0] if self.client else ""
        mine = registry.by_client.get(client)
        crowded = mine is not None and len(mine) >= limits.max_client_connections
        if crowded and not registry.evict_oldest_waiter(mine):  # type: ignore[arg-type]
            self._refuse(429, f"this client has {limits.max_client_connections} connections open")
            return
        if len(registry.all) >= limits.max_connections and not registry.evict_oldest_waiter(registry.all):
            self._refuse(503, f"server busy: {limits.max_connections} connections open")
            return
        self._guard_registry = registry
        registry.add(self, client)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self.unregister()
        super().connection_lost(exc)  # type: ignore[misc]

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        if not self.transport.is_closing() and self._guard_registry is not None:
            self._arm()
            self._guard_registry.waiting_again(self, self._guard_client)

    def unregister(self) -> None:
        if self._guard_timer is not None:
            self._guard_timer.cancel()
            self._guard_timer = None
        if self._guard_registry is not None:
            self._guard_registry.remove(self, self._guard_client)
            self._guard_registry = None

    def waiting_for_headers(self) -> bool:
        """No request in flight, and none begun since the connection started waiting."""
        cycle = self.cycle
        return cycle is self._guard_awaiting and (cycle is None or cycle.response_complete)

    def _arm(self) -> None:
        if self._guard_timer is not None:
            self._guard_timer.cancel()
        self._guard_awaiting = self.cycle
        self._guard_timer = self.loop.call_later(self._guard_limits.header_timeout, self._header_deadline)

    def _header_deadline(self) -> None:
        self._guard_timer = None
        if self.waiting_for_headers() and not self.transport.is_closing():
            self.transport.close()

    def _refuse(self, status: int, detail: str) -> None:
        retry = status != 431  # the same request would be refused again
        body = json.dumps({"detail": f"{detail}; retry later" if retry else detail}).encode()
        head = b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n" % (
            status,
            _PHRASES[status],
            len(body),
        )
        self.transport.write(
            head + (b"retry-after: 1\r\n" if retry else b"") + b"connection: close\r\n\r\n" + body
        )
        self.transport.close()


_PHRASES = {429: b"Too Many Requests", 431: b"Request Header Fields Too Large", 503: b"Service Unavailable"}


class _HeaderCap:
    """Caps a request's line and headers for a parser that does not (httptools): past
    ``max_header_bytes`` the request is answered 431 and the connection closed. The bytes are counted
    as they arrive while the headers are incomplete (at most one read, 256 KiB, reaches the parser
    past the cap), and counted exactly when they are complete (they may come in one read)."""

    transport: asyncio.Transport
    url: bytes
    headers: list[tuple[bytes, bytes]]
    _guard_limits: ConnectionLimits
    _guard_head: int | None = 0  # bytes of the request being read; None once its headers are in
    _guard_over = False  # its headers passed the cap: nothing more of it reaches the app

    def data_received(self, data: bytes) -> None:
        counted = self._guard_head
        if counted is not None:
            self._guard_head = counted + len(data)
        super().data_received(data)  # type: ignore[misc]
        head = self._guard_head  # None if the parser called back on_headers_complete
        over = head is not None and head > self._guard_limits.max_header_bytes
        if (over or self._guard_over) and not self.transport.is_closing():
            self._refuse(431, f"request headers over {self._guard_limits.max_header_bytes} bytes")  # type: ignore[attr-defined]

    def on_message_begin(self) -> None:
        self._guard_head = 0
        super().on_message_begin()  # type: ignore[misc]

    def on_headers_complete(self) -> None:
        self._guard_head = None
        size = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)
        if size > self._guard_limits.max_header_bytes:
            self._guard_over = True  # refused once the parser returns
            return
        super().on_headers_complete()  # type: ignore[misc]

    def on_body(self, body: bytes) -> None:
        if not self._guard_over:
            super().on_body(body)  # type: ignore[misc]

    def on_message_complete(self) -> None:
        if not self._guard_over:
            super().on_message_complete()  # type: ignore[misc]


class GuardedH11Protocol(_Guard, H11Protocol):
    """uvicorn's h11 protocol with judger's connection limits (h11 bounds the header bytes itself)."""


if HttpToolsProtocol is not None:

    class GuardedHttpToolsProtocol(_HeaderCap, _Guard, HttpToolsProtocol):
        """uvicorn's httptools protocol with judger's connection limits and header-byte cap."""
