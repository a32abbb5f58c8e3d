"""RolloutController: generation over one or more OpenAI-compatible servers (vLLM, SGLang, lmdeploy).

``await controller.generate_group(states, sample_params)`` fills ``response``, ``finish_reason``,
``status`` and, when the server returns them, ``response_ids``, ``logprobs`` and ``prompt_ids`` on
every state of a group (the samples of one prompt). The group goes out as few requests as possible:
``n = sample_params.n`` samples each (the whole group in one request when ``n`` is unset), so a
server that shares the prompt's prefix computes it once.

How requests are spread and kept alive:

- **least outstanding requests**: each request goes to the healthy server with the fewest requests
  in flight (ties: the least used);
- **bounded concurrency**: at most ``max_concurrency`` requests in flight over all servers;
- **deadlines**: one attempt is bounded by ``request_timeout``, a request with its retries by
  ``deadline`` (counted from when it may go, not while it waits for a slot); a request past its
  deadline leaves its samples FAILED with the reason;
- **retries with backoff** (full jitter, ``Retry-After`` honoured) on connection errors, dropped
  connections, timeouts, 429 and 5xx, on another server when there is one; other 4xx are the
  caller's fault and fail at once;
- **a server that goes away is taken out**: a refused connection at once, other failures after
  ``max_consecutive_failures`` in a row; a background probe (``GET /v1/models`` every
  ``probe_interval`` seconds) puts it back when it answers. When every server is out, requests
  wait for one to come back (within their deadline).

``finish_reason`` maps to ``Status`` as XTuner does (stop / length / tool_calls -> COMPLETED,
abort -> ABORTED, anything else -> FAILED); a ``length`` finish also sets
``extra_fields["truncated"] = True``. Token ids come from ``token_ids`` (vLLM's
``return_token_ids``) or from logprob tokens written ``"token_id:N"`` (``return_tokens_as_token_ids``);
logprobs are kept only when there is one per response token.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, field_validator

from judger.core.errors import GenerationError
from judger.core.rollout import RolloutState, Status
from judger.runtime.http import RETRY_STATUS, backoff_delay
from judger.trainer.sample_params import SampleParams, as_sample_params

logger = logging.getLogger(__name__)

Endpoint = Literal["chat", "completions"]


class RolloutControllerConfig(BaseModel):
    """Where and how rollouts are generated."""

    model_config = ConfigDict(extra="forbid")

    base_urls: list[str] = Field(min_length=1, description="OpenAI-compatible servers: http://host:port[/v1]")
    model: str | None = Field(
        None, description="served model name; None: the agent loop's hf_checkpoint, else the first listed"
    )
    endpoint: Endpoint = Field("chat", description="'chat' (/v1/chat/completions) or 'completions'")
    max_concurrency: int = Field(256, ge=1, description="requests in flight over all servers")
    request_timeout: float = Field(600.0, gt=0, description="seconds one attempt may take")
    deadline: float | None = Field(
        None, gt=0, description="seconds a request may take with its retries; None: 4 x request_timeout"
    )
    max_retries: int = Field(5, ge=0, description="retries of one request (connection errors, 429, 5xx)")
    backoff_base: float = Field(0.2, ge=0)
    backoff_cap: float = Field(5.0, ge=0)
    max_consecutive_failures: int = Field(3, ge=1, description="failures in a row that take a server out")
    probe_interval: float = Field(2.0, gt=0, description="seconds between probes of a server taken out")
    logprobs: bool = Field(True, description="ask for logprobs (and token ids written as 'token_id:N')")
    return_token_ids: bool = Field(
        True, description="send vLLM's return_token_ids / return_tokens_as_token_ids (off for strict OpenAI)"
    )

    @field_validator("base_urls")
    @classmethod
    def _urls(cls, urls: list[str]) -> list[str]:
        out = []
        for url in urls:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"base_urls: {url!r} is not an http(s):// URL")
            base = url.rstrip("/")
            for suffix in ("/v1/chat/completions", "/v1/completions", "/v1"):
                if base.endswith(suffix):
                    base = base[: -len(suffix)]
                    break
            out.append(base)
        if len(set(out)) != len(out):
            raise ValueError(f"base_urls: a server is listed twice: {urls}")
        return out

    def build(self, **kwargs: Any) -> RolloutController:
        return RolloutController(self, **kwargs)


@dataclass
class ServerState:
    """What the controller knows of one server."""

    url: str
    outstanding: int = 0
    healthy: bool = True
    consecutive_failures: int = 0
    requests: int = 0
    failures: int = 0
    taken_out: int = 0

    def snapshot(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class GenerationStats:
    requests: int = 0
    samples: int = 0
    completion_tokens: int = 0
    retries: int = 0
    failed_requests: int = 0
    seconds: float = 0.0  # summed over requests (overlapping)


def _token_id(token: Any) -> int | None:
    if isinstance(token, str) and token.startswith("token_id:"):
        try:
            return int(token[len("token_id:") :])
        except ValueError:
            return None
    return None


def _spot_checked(values: Any, kinds: tuple[type, ...]) -> list[Any] | None:
    """``values`` if it is a list whose ends are of ``kinds`` (not bool), else None.

    Decoded JSON gives ints and floats already; checking every token of a long response would cost
    more than the rest of the sample's handling (RolloutState checks its token lists the same way).
    """
    if not isinstance(values, list):
        return None
    for item in (values[0], values[-1]) if values else ():
        if isinstance(item, bool) or not isinstance(item, kinds):
            return None
    return values


def parse_choice(choice: dict[str, Any], endpoint: Endpoint) -> dict[str, Any]:
    """``response``, ``finish_reason``, ``response_ids``, ``logprobs`` of one choice (those present)."""
    ids = _spot_checked(choice.get("token_ids"), (int,))
    if endpoint == "chat":
        text = (choice.get("message") or {}).get("content")
        entries = (choice.get("logprobs") or {}).get("content") or None
        logprobs = [e.get("logprob") for e in entries] if entries else None
        tokens = [e.get("token") for e in entries] if entries and ids is None else None
    else:
        text = choice.get("text")
        lp = choice.get("logprobs") or {}
        logprobs = lp.get("token_logprobs")
        tokens = lp.get("tokens") if ids is None else None
    out: dict[str, Any] = {
        "response": text if isinstance(text, str) else "",
        "finish_reason": choice.get("finish_reason"),
    }
    if ids is None and tokens:
        parsed = [_token_id(t) for t in tokens]
        if None not in parsed:
            ids = parsed
    if ids is not None:
        out["response_ids"] = ids
    logprobs = _spot_checked(logprobs, (int, float))
    if logprobs is not None and (ids is None or len(logprobs) == len(ids)):
        out["logprobs"] = logprobs
    prompt_ids = _spot_checked(choice.get("prompt_token_ids"), (int,))
    if prompt_ids is not None:
        out["prompt_ids"] = prompt_ids
    return out


def apply_generation(state: RolloutState, fields: dict[str, Any]) -> None:
    """Write one parsed choice on ``state`` and set its status from the finish reason."""
    state.response = fields["response"]
    state.finish_reason = fields["finish_reason"]
    if "response_ids" in fields:
        state.response_ids = fields["response_ids"]
    if "logprobs" in fields:
        state.logprobs = fields["logprobs"]
    if "prompt_ids" in fields and state.prompt_ids is None:
        state.prompt_ids = fields["prompt_ids"]
    state.status = Status.from_finish_reason(state.finish_reason)
    if state.finish_reason == "length":
        state.extra_fields["truncated"] = True
    if state.status == Status.FAILED:
        state.error_msg = f"generation ended with finish_reason={state.finish_reason!r}"


def _fail(state: RolloutState, message: str) -> None:
    state.status = Status.FAILED
    state.error_msg = message
    state.extra_fields["generation_failure"] = message


class RolloutController:
    """Sends generation requests to a set of OpenAI-compatible servers (see the module docstring).

    ``render_prompt(messages) -> str`` renders a chat for the completions endpoint (a tokenizer's
    chat template; by default one content per line). ``tokenize(text) -> ids`` fills ``prompt_ids``
    the server did not return (never ``response_ids``: only the server knows what it sampled).
    """

    def __init__(
        self,
        config: RolloutControllerConfig,
        *,
        model: str | None = None,
        render_prompt: Callable[[Sequence[dict[str, Any]]], str] | None = None,
        tokenize: Callable[[str], list[int]] | None = None,
    ) -> None:
        self.config = config
        self.model = config.model or model
        self._model_checked = False
        self.render_prompt = render_prompt
        self.tokenize = tokenize
        self.servers = [ServerState(url) for url in config.base_urls]
        self.stats = GenerationStats()
        self._clients: dict[str, httpx.AsyncClient] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots: asyncio.Semaphore | None = None
        self._changed: asyncio.Condition | None = None
        self._probe: asyncio.Task[None] | None = None
        self._model_lock: asyncio.Lock | None = None
        self._all_out_reported = False
        self._deadline = config.deadline or 4 * config.request_timeout

    # --- plumbing bound to the running loop -------------------------------------------------------

    def _bind(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is loop and self._clients and not any(c.is_closed for c in self._clients.values()):
            return
        # One client per server: httpcore's pool scans all its connections for every request it
        # assigns, so one shared pool over several servers grows and slows down (measured: a
        # shared pool sustained half the rate of per-server pools at 64 requests in flight); and a
        # shared pool no larger than the in-flight bound would close connections to one server to
        # open some to another as the load shifts.
        limit = self.config.max_concurrency
        limits = httpx.Limits(max_connections=limit, max_keepalive_connections=limit)
        self._clients = {
            s.url: httpx.AsyncClient(timeout=self.config.request_timeout, limits=limits) for s in self.servers
        }
        self._slots = asyncio.Semaphore(self.config.max_concurrency)
        self._changed = asyncio.Condition()
        self._model_lock = asyncio.Lock()
        self._probe = None
        self._loop = loop

    async def aclose(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
            try:
                await self._probe
            except (asyncio.CancelledError, Exception):
                pass
            self._probe = None
        clients, self._clients = self._clients, {}
        for client in clients.values():
            if not client.is_closed:
                try:
                    await client.aclose()
                except RuntimeError:  # its loop is gone, and its sockets with it
                    pass

    async def __aenter__(self) -> RolloutController:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # --- the model name ---------------------------------------------------------------------------

    async def resolve_model(self) -> str:
        """The served model name: ``config.model`` / the given model, checked against ``/v1/models``
        of the first server that answers, or the first model listed there."""
        self._bind()
        assert self._model_lock is not None
        async with self._model_lock:
            if self._model_checked and self.model is not None:
                return self.model
            errors = []
            for server in self.servers:
                try:
                    resp = await self._clients[server.url].get(f"{server.url}/v1/models", timeout=10.0)
                    listed = [str(m["id"]) for m in resp.json()["data"]]
                except Exception as exc:
                    errors.append(f"{server.url}: {type(exc).__name__}: {exc}")
                    continue
                if self.model is None:
                    if not listed:
                        raise GenerationError(f"{server.url}/v1/models lists no model; set model=")
                    self.model = listed[0]
                elif listed and self.model not in listed:
                    raise GenerationError(
                        f"{server.url} serves {listed}, not model {self.model!r}: set "
                        "RolloutControllerConfig.model (or hf_checkpoint) to the served name"
                    )
                self._model_checked = True
                return self.model
            if self.model is not None:
                return self.model  # no server answers yet; requests will wait for one
            raise GenerationError(f"no server lists its models: {'; '.join(errors)}")

    # --- choosing a server ------------------------------------------------------------------------

    def _pick(self, avoid: ServerState | None) -> ServerState | None:
        healthy = [s for s in self.servers if s.healthy]
        if avoid is not None and len(healthy) > 1:
            healthy = [s for s in healthy if s is not avoid]
        if not healthy:
            return None
        return min(healthy, key=lambda s: (s.outstanding, s.requests))

    async def _acquire(self, avoid: ServerState | None, until: float) -> ServerState:
        assert self._changed is not None
        while True:
            server = self._pick(avoid)
            if server is not None:
                server.outstanding += 1
                server.requests += 1
                return server
            self._ensure_probe()
            left = until - time.monotonic()
            self._report_all_out(left)
            if left <= 0:
                raise GenerationError("every server is out and none came back before the deadline")
            async with self._changed:
                try:
                    wait = min(left, self.config.probe_interval)
                    await asyncio.wait_for(self._changed.wait(), timeout=wait)
                except asyncio.TimeoutError:
                    pass

    def _report_all_out(self, left: float) -> None:
        """Say once per outage, as it starts, that every server is out and when waiting ends."""
        if self._all_out_reported:
            return
        self._all_out_reported = True
        give_up = time.strftime("%H:%M:%S", time.localtime(time.time() + max(0.0, left)))
        logger.warning(
            "every rollout server is out (%s): requests wait for one to come back (probed every %g s) "
            "and fail at their deadline of %g s, the first at %s",
            ", ".join(s.url for s in self.servers),
            self.config.probe_interval,
            self._deadline,
            give_up,
        )

    async def _notify(self) -> None:
        assert self._changed is not None
        async with self._changed:
            self._changed.notify_all()

    async def _take_out(self, server: ServerState, why: str) -> None:
        if server.healthy:
            server.healthy = False
            server.taken_out += 1
            logger.warning("rollout server %s taken out: %s", server.url, why)
        self._ensure_probe()

    def _ensure_probe(self) -> None:
        if self._probe is None or self._probe.done():
            self._probe = asyncio.ensure_future(self._probe_loop())

    async def _probe_loop(self) -> None:
        while any(not s.healthy for s in self.servers):
            await asyncio.sleep(self.config.probe_interval)
            back = []
            for server in [s for s in self.servers if not s.healthy]:
                try:
                    resp = await self._clients[server.url].get(
                        f"{server.url}/v1/models", timeout=min(5.0, self.config.request_timeout)
                    )
                except (httpx.HTTPError, OSError):
                    continue
                if resp.status_code < 500:
                    back.append(server)
            # all at once, after the round: woken at the first one back, the waiting requests would
            # all go to it while the others, back too, are still to be probed
            for server in back:
                server.healthy = True
                server.consecutive_failures = 0
                logger.warning("rollout server %s is back", server.url)
            if back:
                self._all_out_reported = False
                await self._notify()

    # --- one request ------------------------------------------------------------------------------

    def _body(self, state: RolloutState, params: SampleParams, n: int, model: str) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, **params.to_body(), "n": n}
        if self.config.endpoint == "chat":
            body["messages"] = state.message
            if self.config.logprobs:
                body.setdefault("logprobs", True)
        else:
            if state.prompt_ids:
                body["prompt"] = list(state.prompt_ids)
            else:
                render = self.render_prompt or _plain_render
                body["prompt"] = render(state.message)
            if self.config.logprobs:
                body.setdefault("logprobs", 0)
        if self.config.return_token_ids:
            # the ids cost the server next to nothing, unlike logprobs: asked for on their own
            body.setdefault("return_token_ids", True)
            if self.config.logprobs:
                body.setdefault("return_tokens_as_token_ids", True)
        return body

    async def request(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` to the endpoint of the least busy healthy server, retrying as documented."""
        self._bind()
        assert self._slots is not None
        path = "/v1/chat/completions" if self.config.endpoint == "chat" else "/v1/completions"
        last = "no attempt"
        avoid: ServerState | None = None
        async with self._slots:
            # the deadline starts once the request may go: waiting behind max_concurrency is not its fault
            until = time.monotonic() + self._deadline
            for attempt in range(self.config.max_retries + 1):
                server = await self._acquire(avoid, until)
                retry_after: str | None = None
                try:
                    timeout = min(self.config.request_timeout, max(0.001, until - time.monotonic()))
                    resp = await asyncio.wait_for(
                        self._clients[server.url].post(server.url + path, json=body, timeout=timeout),
                        timeout + 1.0,
                    )
                except (httpx.ConnectError, ConnectionRefusedError) as exc:
                    last = f"{server.url}: {type(exc).__name__}: {exc}"
                    server.failures += 1
                    await self._take_out(server, last)
                except (httpx.TransportError, asyncio.TimeoutError, OSError) as exc:
                    last = f"{server.url}: {type(exc).__name__}: {exc}".rstrip(": ")
                    await self._failed(server, last)
                else:
                    if resp.status_code < 400:
                        try:
                            reply = resp.json()
                        except (json.JSONDecodeError, UnicodeDecodeError):
                            last = f"{server.url}: reply is not JSON: {resp.text[:200]!r}"
                            await self._failed(server, last)
                        else:
                            server.consecutive_failures = 0
                            return reply
                    else:
                        last = f"{server.url}: HTTP {resp.status_code}: {resp.text[:200]!r}"
                        if resp.status_code not in RETRY_STATUS:
                            raise GenerationError(f"{last} (not retried)")
                        retry_after = resp.headers.get("retry-after")
                        if resp.status_code != 429:  # 429 is a busy server, not a sick one
                            await self._failed(server, last)
                finally:
                    server.outstanding -= 1
                avoid = server
                if attempt == self.config.max_retries or time.monotonic() >= until:
                    break
                self.stats.retries += 1
                delay = backoff_delay(attempt, self.config.backoff_base, self.config.backoff_cap, retry_after)
                await asyncio.sleep(min(delay, max(0.0, until - time.monotonic())))
        if time.monotonic() >= until:
            raise GenerationError(f"deadline of {self._deadline:g} s passed; last error: {last}")
        raise GenerationError(f"failed after {self.config.max_retries + 1} attempts; last: {last}")

    async def _failed(self, server: ServerState, why: str) -> None:
        server.failures += 1
        server.consecutive_failures += 1
        if server.consecutive_failures >= self.config.max_consecutive_failures:
            await self._take_out(server, f"{server.consecutive_failures} failures in a row; last: {why}")

    # --- groups -----------------------------------------------------------------------------------

    async def generate_group(
        self, states: Sequence[RolloutState], sample_params: SampleParams | dict[str, Any] | None = None
    ) -> list[RolloutState]:
        """Generate one sample per state; the states share a prompt (``states[0].message``).

        Never raises for a failed request: its samples become FAILED with ``error_msg`` (and
        ``extra_fields["generation_failure"]``).
        """
        states = list(states)
        if not states:
            return states
        params = as_sample_params(sample_params)
        try:
            model = await self.resolve_model()
        except GenerationError as exc:
            for state in states:
                _fail(state, f"generation failed: {exc}")
            return states
        per_request = params.n or len(states)
        chunks = [states[i : i + per_request] for i in range(0, len(states), per_request)]
        await asyncio.gather(*(self._generate_chunk(chunk, params, model) for chunk in chunks))
        return states

    async def generate(
        self, state: RolloutState, sample_params: SampleParams | dict[str, Any] | None = None
    ) -> RolloutState:
        """One sample for ``state``."""
        params = as_sample_params(sample_params).model_copy(update={"n": 1})
        await self.generate_group([state], params)
        return state

    async def _generate_chunk(self, chunk: list[RolloutState], params: SampleParams, model: str) -> None:
        start = time.perf_counter()
        body = self._body(chunk[0], params, len(chunk), model)
        try:
            reply = await self.request(body)
            choices = sorted(reply["choices"], key=lambda c: c.get("index", 0))
            if len(choices) != len(chunk):
                raise GenerationError(f"asked for {len(chunk)} choices, the server sent {len(choices)}")
            parsed = [parse_choice(c, self.config.endpoint) for c in choices]
        except (GenerationError, KeyError, TypeError, AttributeError) as exc:
            self.stats.failed_requests += 1
            message = f"generation failed: {exc if isinstance(exc, GenerationError) else repr(exc)}"
            for state in chunk:
                _fail(state, message)
            return
        finally:
            self.stats.requests += 1
            self.stats.seconds += time.perf_counter() - start
        prompt_ids = _spot_checked(reply.get("prompt_token_ids"), (int,))
        for state, fields in zip(chunk, parsed):
            if prompt_ids is not None and "prompt_ids" not in fields:
                fields["prompt_ids"] = list(prompt_ids)  # each sample owns its lists
            apply_generation(state, fields)
            # the response is never re-tokenized: those ids need not be the ones the server sampled
            if self.tokenize is not None and state.prompt_ids is None:
                state.prompt_ids = self.tokenize((self.render_prompt or _plain_render)(state.message))
        usage = reply.get("usage") or {}
        tokens = usage.get("completion_tokens")
        if not isinstance(tokens, int):
            tokens = sum(len(s.response_ids or ()) for s in chunk)
        self.stats.completion_tokens += tokens
        self.stats.samples += len(chunk)

    def server_states(self) -> list[dict[str, Any]]:
        return [s.snapshot() for s in self.servers]


def _plain_render(messages: Sequence[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages)
