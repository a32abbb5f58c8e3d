"""One pooled HTTP client with retries: exponential backoff with full jitter.

Used by URL reward handlers and LLM verifiers. Connection errors, 5xx and 429 are retried (429 and
503 honour ``Retry-After``); other 4xx are the caller's fault and are not. Every attempt runs under
one total deadline (``timeout``) and reads at most ``max_reply_bytes`` (see
:mod:`judger.runtime.bounded`); a redirect is refused, never followed.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import httpx

from judger.core.errors import HandlerHTTPError, HandlerHTTPTimeout
from judger.runtime.bounded import DEFAULT_MAX_REPLY_BYTES, ReplyError, bounded_request

RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


def backoff_delay(attempt: int, base: float, cap: float, retry_after: str | None = None) -> float:
    """Seconds to wait before retry ``attempt`` (0-based): full jitter, or the server's Retry-After."""
    if retry_after:
        try:
            return min(cap, max(0.0, float(retry_after)))
        except ValueError:
            pass
    return random.uniform(0, min(cap, base * (2**attempt)))


class HttpClient:
    """A lazily created ``httpx.AsyncClient`` shared by all calls of its owner.

    The client is bound to the event loop that created it; when the owner is used from another
    loop (each ``asyncio.run`` makes a new one) a fresh client is made for that loop.
    """

    def __init__(
        self,
        *,
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff_base: float = 0.2,
        backoff_cap: float = 5.0,
        max_connections: int = 256,
        headers: dict[str, str] | None = None,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
    ) -> None:
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if max_reply_bytes < 1:
            raise ValueError(f"max_reply_bytes must be >= 1, got {max_reply_bytes}")
        self.timeout = timeout
        self.max_reply_bytes = max_reply_bytes
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.max_connections = max_connections
        self.headers = dict(headers or {})
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop or self._client.is_closed:
            limits = httpx.Limits(
                max_connections=self.max_connections, max_keepalive_connections=self.max_connections
            )
            self._client = httpx.AsyncClient(timeout=self.timeout, limits=limits, headers=self.headers)
            self._loop = loop
        return self._client

    async def request_json(self, method: str, url: str, payload: Any = None) -> Any:
        """Send ``payload`` as JSON and return the decoded JSON reply, retrying what is worth it."""
        last = ""
        for attempt in range(self.max_retries + 1):
            retry_after = None
            try:
                resp = await bounded_request(
                    self.client(),
                    method,
                    url,
                    json=payload,
                    deadline=self.timeout,
                    max_bytes=self.max_reply_bytes,
                )
            except (httpx.TransportError, httpx.TimeoutException, TimeoutError) as exc:
                # A timeout means the server took the request and is slow; resending it only adds
                # load, so give up at once. Connection-level failures are retried.
                if isinstance(exc, (httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout, TimeoutError)):
                    raise HandlerHTTPTimeout(
                        f"{method} {url}: timeout after {self.timeout:g} s ({type(exc).__name__})"
                    ) from exc
                last = f"{type(exc).__name__}: {exc}"
            except ReplyError as exc:
                raise HandlerHTTPError(f"{method} {url}: {exc}") from None
            else:
                if resp.ok:
                    try:
                        return await resp.json()
                    except ReplyError as exc:
                        raise HandlerHTTPError(f"{method} {url}: {exc}: {resp.head()!r}") from None
                last = f"HTTP {resp.status_code}: {resp.head()!r}"
                if resp.status_code not in RETRY_STATUS:
                    raise HandlerHTTPError(f"{method} {url} failed with {last} (not retried)")
                retry_after = resp.headers.get("retry-after")
            if attempt < self.max_retries:
                await asyncio.sleep(backoff_delay(attempt, self.backoff_base, self.backoff_cap, retry_after))
        raise HandlerHTTPError(f"{method} {url} failed after {self.max_retries + 1} attempts; last: {last}")

    async def post_json(self, url: str, payload: Any) -> Any:
        return await self.request_json("POST", url, payload)

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None and not client.is_closed:
            try:
                await client.aclose()
            except RuntimeError:
                # the loop that owned it is gone; its sockets went with it
                pass
