"""OpenAI-compatible chat endpoints on several hosts: least-loaded choice, failover, lazy model names.

One pooled ``httpx.AsyncClient`` per event loop (from a :class:`~judger.runtime.http.HttpClient`)
serves all hosts. The retry policy is our own (it changes host and reads status codes and
``Retry-After``), with the backoff and the retryable status codes of :mod:`judger.runtime.http`.
Each request goes to the host with the fewest requests in flight among those not cooling down after
a failure; a failed attempt (connection error, timeout, 429/5xx, malformed reply) is retried with
backoff on another host. The model name of each host comes from ``GET /v1/models`` on first use,
asynchronously and once per host (concurrent first requests share one lookup). Every request, the
model lookup included, runs under one total deadline (``timeout``) and reads at most
``max_reply_bytes`` (see :mod:`judger.runtime.bounded`); a redirect is an error, never followed.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from judger.core.errors import HandlerHTTPError, HandlerHTTPTimeout
from judger.runtime.bounded import DEFAULT_MAX_REPLY_BYTES, BoundedReply, ReplyError, bounded_request
from judger.runtime.http import RETRY_STATUS, HttpClient, backoff_delay

MODELS_PATH = "/v1/models"
CHAT_PATH = "/v1/chat/completions"

# Each host's requests in flight follow its pace (see ChatHosts): a new host starts with a few and,
# while its answers come back fast, takes one more per answer (doubling per round trip, as TCP's slow
# start); once an answer takes more than a share of the attempt's deadline, the host holds a quarter
# fewer (once per round trip), then grows by one per round trip; a timed-out attempt halves it.
START_IN_FLIGHT = 16
_TARGET_SHARE = 0.5  # an answer within half its deadline leaves the other half for queueing noise
_DECREASE = 0.75


def normalize_host(host: str) -> str:
    """``"10.0.0.5:8000"``, ``"http://h:8000/"`` or ``"http://h:8000/v1"`` -> ``"http://h:8000"``."""
    url = host.strip()
    if not url:
        raise ValueError("empty host in hosts")
    if "://" not in url:
        url = "http://" + url
    url = url.rstrip("/")
    if url.endswith("/v1"):
        url = url[: -len("/v1")]
    return url


@dataclass(slots=True)
class HostState:
    """What the balancer knows about one host."""

    url: str
    in_flight: int = 0
    failures: int = 0  # consecutive; reset by a success
    down_until: float = 0.0  # monotonic time before which the host is avoided
    model: str | None = None
    requests: int = 0
    errors: int = 0
    limit: float = float(START_IN_FLIGHT)  # requests in flight allowed, following the host's pace
    slow_start: bool = True  # no answer has been late yet: grow by one per answer
    cut_at: float = 0.0  # when the limit was last cut: answers to requests sent before say nothing new

    def has_room(self) -> bool:
        return self.in_flight < max(1, int(self.limit))


@dataclass(slots=True)
class ChatReply:
    """The grader's text and where it came from."""

    text: str
    host: str
    model: str
    finish_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)


class ChatHosts:
    """Send chat completions to the least-loaded healthy host, retrying failures on other hosts.

    ``max_concurrency`` bounds the requests in flight across all hosts (per event loop);
    ``max_retries`` is the number of extra attempts after the first, each preferably on a host not
    yet tried for this request. A host that fails is avoided for ``cooldown`` seconds (doubling with
    consecutive failures, capped at ``backoff_cap``) unless every host is cooling down.

    Each host also takes only as many requests at once as it answers in time: a server keeps the
    requests it cannot start in a queue, where their deadline runs, so a burst larger than it can
    serve within ``timeout`` would fail its tail. The bound starts at :data:`START_IN_FLIGHT` (at
    most ``max_concurrency``), grows by one per answer back within a quarter of ``timeout``
    (doubling per round trip, so a fast server is soon full), is cut by a quarter when an answer
    takes more than half of ``timeout`` and halved when an attempt times out, then grows by one per
    round trip again. Requests over it wait here, where no attempt's deadline runs.
    """

    def __init__(
        self,
        hosts: list[str],
        *,
        model: str | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff_base: float = 0.2,
        backoff_cap: float = 5.0,
        cooldown: float = 1.0,
        max_concurrency: int = 64,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
    ) -> None:
        if not hosts:
            raise ValueError(
                "hosts is empty: give at least one OpenAI-compatible server, e.g. ['127.0.0.1:8000']"
            )
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        start = float(min(START_IN_FLIGHT, max_concurrency))
        self.hosts = [HostState(normalize_host(h), limit=start) for h in hosts]
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.cooldown = cooldown
        self.max_concurrency = max_concurrency
        self.max_reply_bytes = max_reply_bytes
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # every request (model lookups included) holds the semaphore: it bounds the connections
        self._pooled = HttpClient(timeout=timeout, max_connections=max_concurrency, headers=headers)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sem: asyncio.Semaphore | None = None
        self._room: asyncio.Event | None = None  # set when a request gives its host's slot back
        self._lookups: dict[str, asyncio.Future[str]] = {}

    # --- per-loop state --------------------------------------------------------------------------

    def _bind(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._sem is None:
            # asyncio primitives belong to one loop; each asyncio.run() gets its own
            self._loop = loop
            self._sem = asyncio.Semaphore(self.max_concurrency)
            self._room = asyncio.Event()
            self._lookups = {}
        return self._sem

    def _http(self) -> httpx.AsyncClient:
        """The pooled client of the running loop (HttpClient makes one per loop)."""
        return self._pooled.client()

    # --- balancing -------------------------------------------------------------------------------

    def pick(self, tried: set[str], among: list[HostState] | None = None) -> HostState:
        """The least-loaded host that is not cooling down, preferring hosts not in ``tried``
        (of ``among``, default every host)."""
        now = time.monotonic()
        hosts = self.hosts if among is None else among
        fresh = [h for h in hosts if h.url not in tried] or hosts
        healthy = [h for h in fresh if h.down_until <= now]
        if not healthy:
            return min(fresh, key=lambda h: (h.down_until, h.in_flight))
        least = min(h.in_flight for h in healthy)
        return random.choice([h for h in healthy if h.in_flight == least])

    async def _take_host(self, tried: set[str]) -> HostState:
        """The host this attempt goes to (as :meth:`pick` chooses among those with room), counted in
        flight; waits while every host has as many requests as it answers in time."""
        assert self._room is not None
        while True:
            open_hosts = [h for h in self.hosts if h.has_room()]
            if open_hosts:
                host = self.pick(tried, open_hosts)
                host.in_flight += 1
                return host
            # no await between the look and the clear: a release cannot slip in between
            self._room.clear()
            await self._room.wait()

    def _give_back(self, host: HostState) -> None:
        host.in_flight -= 1
        if self._room is not None:
            self._room.set()  # synchronous: a cancel in a `finally` cannot lose it

    def _paced(self, host: HostState, latency: float, sent: float) -> None:
        """Follow the host's pace from an answer that took ``latency`` seconds (sent at ``sent``)."""
        target = self.timeout * _TARGET_SHARE
        if latency > target:
            if sent >= host.cut_at:  # sent after the last cut: the cut was not enough
                host.limit = max(1.0, host.limit * _DECREASE)
                host.cut_at = time.monotonic()
                host.slow_start = False
        elif latency < target / 2 and host.limit < self.max_concurrency:
            step = 1.0 if host.slow_start else 1.0 / host.limit
            host.limit = min(float(self.max_concurrency), host.limit + step)

    def _timed_out(self, host: HostState) -> None:
        host.limit = max(1.0, host.limit / 2)
        host.cut_at = time.monotonic()
        host.slow_start = False

    def _failed(self, host: HostState) -> None:
        host.failures += 1
        host.errors += 1
        delay = min(self.backoff_cap, self.cooldown * 2 ** (host.failures - 1))
        host.down_until = time.monotonic() + delay

    @staticmethod
    def _succeeded(host: HostState) -> None:
        host.failures = 0
        host.down_until = 0.0

    # --- model discovery -------------------------------------------------------------------------

    async def model_for(self, host: HostState) -> str:
        """The model to name in requests to ``host``: the configured one, or the first it lists."""
        if self.model:
            return self.model
        if host.model:
            return host.model
        pending = self._lookups.get(host.url)
        if pending is None or (pending.done() and (pending.cancelled() or pending.exception() is not None)):
            pending = asyncio.ensure_future(self._discover(host))
            self._lookups[host.url] = pending
        # shield: one caller's deadline must not cancel the lookup the others are waiting on
        return await asyncio.shield(pending)

    async def _discover(self, host: HostState) -> str:
        url = host.url + MODELS_PATH
        resp = await self._get_reply(url, "GET")
        if not resp.ok:
            raise _AttemptError(f"GET {url}: HTTP {resp.status_code}: {resp.head()!r}", resp)
        try:
            model = (await resp.json())["data"][0]["id"]
        except (ReplyError, KeyError, IndexError, TypeError) as exc:
            raise _AttemptError(f"GET {url}: no model id in reply {resp.head()!r}") from exc
        if not isinstance(model, str) or not model:
            raise _AttemptError(f"GET {url}: model id {model!r:.80} is not a name")
        host.model = model
        return host.model

    async def _get_reply(self, url: str, method: str, payload: Any = None) -> BoundedReply:
        """One request under the total deadline and the size cap; failures as _AttemptError."""
        try:
            return await bounded_request(
                self._http(), method, url, json=payload, deadline=self.timeout, max_bytes=self.max_reply_bytes
            )
        except (httpx.TimeoutException, TimeoutError) as exc:
            raise _AttemptError(
                f"{url}: timeout after {self.timeout:g} s ({type(exc).__name__})", timed_out=True
            ) from exc
        except httpx.TransportError as exc:
            raise _AttemptError(f"{url}: {type(exc).__name__}: {exc}") from exc
        except ReplyError as exc:
            raise _AttemptError(f"{method} {url}: {exc}") from exc

    # --- requests --------------------------------------------------------------------------------

    async def chat(self, messages: list[dict[str, Any]], **params: Any) -> ChatReply:
        """POST ``/v1/chat/completions`` and return the first choice's text."""
        sem = self._bind()
        tried: set[str] = set()
        last = ""
        timed_out = False
        attempts = 0
        for attempt in range(self.max_retries + 1):
            attempts = attempt + 1
            retry_after: str | None = None
            async with sem:
                host = await self._take_host(tried)
                tried.add(host.url)
                host.requests += 1
                sent = time.monotonic()
                try:
                    reply = await self._attempt(host, messages, params)
                except _AttemptError as exc:
                    last, timed_out = str(exc), exc.timed_out
                    if timed_out:
                        self._timed_out(host)
                    code = exc.response.status_code if exc.response is not None else None
                    if (
                        code is not None
                        and code not in RETRY_STATUS
                        and not (code == 404 and self.model is None)
                    ):
                        # the request itself is wrong (400, 401, 422, ...): another host would agree
                        raise HandlerHTTPError(f"{last} (not retried)") from None
                    self._failed(host)
                    if code == 404:
                        host.model = None  # the server may now serve another model: look it up again
                    if exc.response is not None:
                        retry_after = exc.response.headers.get("retry-after")
                    if timed_out and len(tried) >= len(self.hosts):
                        # every host was tried and this one took the request but stayed silent:
                        # resending it would only add load to a grader that is already behind
                        break
                else:
                    self._succeeded(host)
                    self._paced(host, time.monotonic() - sent, sent)
                    return reply
                finally:
                    self._give_back(host)
            if attempt < self.max_retries:
                await asyncio.sleep(backoff_delay(attempt, self.backoff_base, self.backoff_cap, retry_after))
        where = ", ".join(sorted(tried))
        message = f"chat completion failed after {attempts} attempts on {where}; last: {last}"
        raise (HandlerHTTPTimeout if timed_out else HandlerHTTPError)(message)

    async def _attempt(
        self, host: HostState, messages: list[dict[str, Any]], params: dict[str, Any]
    ) -> ChatReply:
        url = host.url + CHAT_PATH
        model = await self.model_for(host)
        resp = await self._get_reply(url, "POST", {"model": model, "messages": messages, **params})
        if not resp.ok:
            raise _AttemptError(f"POST {url}: HTTP {resp.status_code}: {resp.head()!r}", resp)
        try:
            body = await resp.json()
            choice = body["choices"][0]
            text = choice["message"]["content"]
        except (ReplyError, KeyError, IndexError, TypeError) as exc:
            raise _AttemptError(f"POST {url}: malformed chat completion {resp.head()!r}") from exc
        if text is not None and not isinstance(text, str):
            # a list of parts or an object: not a reply we know how to read, never an empty verdict
            raise _AttemptError(f"POST {url}: message.content is a {type(text).__name__}, not text")
        return ChatReply(
            text=text if isinstance(text, str) else "",
            host=host.url,
            model=model,
            finish_reason=choice.get("finish_reason"),
            usage=body.get("usage") or {},
        )

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per host: requests sent, failed attempts, in flight now, consecutive failures, model."""
        return {
            h.url: {
                "requests": h.requests,
                "errors": h.errors,
                "in_flight": h.in_flight,
                "failures": h.failures,
                "model": h.model,
                "limit": int(h.limit),
            }
            for h in self.hosts
        }

    async def aclose(self) -> None:
        await self._pooled.aclose()


class _AttemptError(Exception):
    """One failed attempt on one host (never escapes ``chat``)."""

    def __init__(
        self, message: str, response: BoundedReply | None = None, *, timed_out: bool = False
    ) -> None:
        super().__init__(message)
        self.response = response
        self.timed_out = timed_out
