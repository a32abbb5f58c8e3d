"""RolloutController: generation over one or more OpenAI-compatible servers (vLLM, SGLang, lmdeploy).

``await controller.generate_group(states, sample_params)`` fills ``response``, ``finish_reason``,
``status`` and, when the server returns them, ``response_ids``, ``logprobs`` and ``prompt_ids`` on
every state of a group (the samples of one prompt). The group goes out as few requests as possible:
``n = sample_params.n`` samples each (the whole group in one request when ``n`` is unset), so a
server that shares the prompt's prefix computes it once. A server that ignores ``n`` (llama.cpp's
answers one choice) is detected on its first such reply, said once in a warning, and from then on
every sample goes as a request of one. When a group goes as several requests and ``seed`` is set,
each request gets ``seed`` plus the index of its first sample, so that they differ.

How requests are spread and kept alive:

- **least outstanding requests**: each request goes to the healthy server with the fewest requests
  in flight (ties: the least used);
- **bounded concurrency**: at most ``max_concurrency`` requests in flight over all servers;
- **deadlines**: one attempt is bounded by ``request_timeout`` in all (connect, headers and body,
  not per read), a request with its retries by ``deadline`` (counted from when it may go, not while
  it waits for a slot); a request past its deadline leaves its samples FAILED with the reason;
- **bounded replies**: a reply may take ``max_reply_bytes`` on the wire and decoded (a gzip bomb or
  an endless body fails the attempt at the cap; see :mod:`judger.runtime.bounded`); only a 2xx is an
  answer, a redirect is refused and never followed;
- **retries with backoff** (full jitter, ``Retry-After`` honoured) on connection errors, dropped
  connections, timeouts, 429 and 5xx, on another server when there is one; other 4xx are the
  caller's fault and fail at once;
- **a server that goes away is taken out**: a refused connection at once, other failures after
  ``max_consecutive_failures`` in a row; a background probe (``GET /v1/models`` every
  ``probe_interval`` seconds, all servers out probed at once, each within ``models_timeout``) puts
  it back when it answers. When every server is out, requests wait for one to come back (within
  their deadline). The model lookup asks every server at once, each within ``models_timeout``.

``finish_reason`` maps to ``Status`` as XTuner does (stop / length / tool_calls -> COMPLETED,
abort -> ABORTED, anything else -> FAILED, with ``extra_fields["generation_failure"]``); a
``length`` finish also sets ``extra_fields["truncated"] = True``. Token ids come from ``token_ids``
(vLLM's ``return_token_ids``) or from logprob tokens written ``"token_id:N"``
(``return_tokens_as_token_ids``). A reply's choices must carry the indexes 0..k-1 once each, k <= n
(:mod:`judger.trainer.replies`). A request of one sample records its reply's ``usage`` counts in
``extra_fields["usage"]`` (the token counts a server without token ids still gives). Every
choice is checked before it reaches a sample (:mod:`judger.trainer.validation`: ids are ints in the
vocabulary, logprobs finite and <= 0 and one per token, text a string encodable as UTF-8); a choice
that fails leaves its sample FAILED with the reason.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, field_validator

from judger.core.deadlines import wait_for
from judger.core.errors import GenerationError
from judger.core.rollout import RolloutState, Status
from judger.runtime.bounded import BoundedReply, ReplyError, ReplyTooLarge, bounded_request
from judger.runtime.http import RETRY_STATUS, backoff_delay
from judger.trainer.replies import ordered_choices, usage_counts
from judger.trainer.sample_params import SampleParams, as_sample_params
from judger.trainer.validation import fail_invalid, generation_problem

logger = logging.getLogger(__name__)

Endpoint = Literal["chat", "completions"]

DEFAULT_MAX_REPLY_BYTES = 128 * 2**20  # a group of 16 x 32k tokens with vLLM's logprob entries


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
    backoff_base: float = Field(
        0.2,
        ge=0,
        description=(
            "seconds: a retry waits up to backoff_base x 2^attempt (full jitter), or the server's Retry-After"
        ),
    )
    backoff_cap: float = Field(5.0, ge=0, description="seconds: the longest wait between retries")
    max_consecutive_failures: int = Field(3, ge=1, description="failures in a row that take a server out")
    probe_interval: float = Field(2.0, gt=0, description="seconds between probes of a server taken out")
    logprobs: bool = Field(True, description="ask for logprobs (and token ids written as 'token_id:N')")
    return_token_ids: bool = Field(
        True, description="send vLLM's return_token_ids / return_tokens_as_token_ids (off for strict OpenAI)"
    )
    max_reply_bytes: int = Field(
        DEFAULT_MAX_REPLY_BYTES,
        ge=1024,
        description="bytes one reply may take, on the wire and decoded; a larger one fails the attempt",
    )
    models_timeout: float = Field(
        10.0, gt=0, description="seconds in all for one GET /v1/models (the model lookup, each probe)"
    )
    vocab_size: int | None = Field(
        None, ge=1, description="token ids must be below it; None: below 2**31 - 1"
    )
    tokenize_responses: bool = Field(
        False,
        description="a reply without token ids gets its response's from the local tokenizer "
        "(hf_checkpoint): ids that need not be the tokens the server sampled, and no logprobs; "
        "off: the data path stops at such a server's first reply (judger.trainer.token_ids)",
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


def parse_choice(choice: dict[str, Any], endpoint: Endpoint) -> dict[str, Any]:
    """``response``, ``finish_reason``, ``response_ids``, ``logprobs``, ``prompt_ids`` of one choice
    (those present), as the server sent them; ``invalid`` says why they cannot be used, if so."""
    if not isinstance(choice, dict):
        raise GenerationError(f"a choice is a {type(choice).__name__}, not an object")
    ids = choice.get("token_ids")
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
        # None is a reply with no text (a tool call); any other non-string is refused below
        "response": "" if text is None else text,
        "finish_reason": choice.get("finish_reason"),
    }
    if ids is None and tokens:
        parsed = [_token_id(t) for t in tokens]
        if None not in parsed:
            ids = parsed
    if ids is not None:
        out["response_ids"] = ids
    if logprobs is not None:
        out["logprobs"] = logprobs
    prompt_ids = choice.get("prompt_token_ids")
    if prompt_ids is not None:
        out["prompt_ids"] = prompt_ids
    return out


def choice_problem(fields: dict[str, Any], vocab_size: int | None = None) -> str | None:
    """Why a parsed choice cannot become a sample (see :mod:`judger.trainer.validation`), or None."""
    response = fields["response"]
    if not isinstance(response, str):
        return f"the reply's text is a {type(response).__name__}, not a string"
    finish = fields["finish_reason"]
    if finish is not None and not isinstance(finish, str):
        return f"finish_reason is a {type(finish).__name__}, not a string"
    return generation_problem(
        response, fields.get("prompt_ids"), fields.get("response_ids"), fields.get("logprobs"), vocab_size
    )


def apply_generation(state: RolloutState, fields: dict[str, Any]) -> None:
    """Write one parsed (and checked: :func:`choice_problem`) choice on ``state`` and set its status
    from the finish reason."""
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
        # counted as a generation failure by reports and exit codes, like a failed request
        state.extra_fields["generation_failure"] = state.error_msg


def _fail(state: RolloutState, message: str) -> None:
    state.status = Status.FAILED
    state.error_msg = message
    state.extra_fields["generation_failure"] = message


class RolloutController:
    """Sends generation requests to a set of OpenAI-compatible servers (see the module docstring).

    ``render_prompt(messages) -> str`` renders a chat for the completions endpoint (a tokenizer's
    chat template; by default one content per line). ``tokenize(text) -> ids`` fills ``prompt_ids``
    the server did not return (never ``response_ids``: only the server knows what it sampled).
    ``tokenize_response(state, params) -> ids`` fills ``response_ids`` the server did not return,
    only when ``config.tokenize_responses`` asks for it (see :mod:`judger.trainer.token_ids`).
    """

    def __init__(
        self,
        config: RolloutControllerConfig,
        *,
        model: str | None = None,
        render_prompt: Callable[[Sequence[dict[str, Any]]], str] | None = None,
        tokenize: Callable[[str], list[int]] | None = None,
        tokenize_response: Callable[[RolloutState, SampleParams], list[int]] | None = None,
    ) -> None:
        if config.tokenize_responses and tokenize_response is None:
            raise ValueError(
                "RolloutControllerConfig.tokenize_responses needs the policy's tokenizer: build the "
                "data path with AgentLoopManagerConfig and hf_checkpoint a local model folder (or "
                "build(tokenizer=...)), or pass tokenize_response= "
                "(judger.trainer.token_ids.ResponseTokenizer)"
            )
        self.config = config
        self.tokenize_response = tokenize_response if config.tokenize_responses else None
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
        # set when a server answers fewer choices than ``n`` asked: then every sample goes alone
        self.ignores_n = False

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
        of the first server that answers, or the first model listed there.

        Every server is asked at once, each within ``models_timeout``: one that stalls cannot hold
        the lookup past that, nor keep the others from answering.
        """
        self._bind()
        assert self._model_lock is not None
        async with self._model_lock:
            if self._model_checked and self.model is not None:
                return self.model
            errors: list[str] = []
            lookups = {asyncio.ensure_future(self._list_models(s)): s for s in self.servers}
            listed: list[str] | None = None
            try:
                for next_done in asyncio.as_completed(lookups):
                    try:
                        listed, server = await next_done
                    except GenerationError as exc:
                        errors.append(str(exc))
                        continue
                    break
            finally:
                for task in lookups:
                    task.cancel()
                await asyncio.gather(*lookups, return_exceptions=True)
            if listed is None:
                if self.model is not None:
                    return self.model  # no server answers yet; requests will wait for one
                raise GenerationError(f"no server lists its models: {'; '.join(errors)}")
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

    async def _get_models(self, server: ServerState) -> BoundedReply:
        """``GET /v1/models`` within ``models_timeout`` in all, its body within ``max_reply_bytes``."""
        return await bounded_request(
            self._clients[server.url],
            "GET",
            f"{server.url}/v1/models",
            deadline=self.config.models_timeout,
            max_bytes=self.config.max_reply_bytes,
        )

    async def _list_models(self, server: ServerState) -> tuple[list[str], ServerState]:
        try:
            resp = await self._get_models(server)
            if not resp.ok:
                raise GenerationError(f"HTTP {resp.status_code}: {resp.head()!r}")
            data = (await resp.json())["data"]
            listed = [m["id"] for m in data]
        except GenerationError as exc:
            raise GenerationError(f"{server.url}: {exc}") from None
        except TimeoutError:
            raise GenerationError(
                f"{server.url}: /v1/models did not answer within {self.config.models_timeout:g} s"
            ) from None
        except Exception as exc:
            raise GenerationError(f"{server.url}: {type(exc).__name__}: {exc}") from None
        if not all(isinstance(m, str) for m in listed):
            raise GenerationError(f"{server.url}: /v1/models lists ids that are not names")
        return listed, server

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
                    await wait_for(self._changed.wait(), timeout=wait)
                except TimeoutError:
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
            # all at once, each within its own deadline: one stalled server cannot keep the
            # others from being probed back
            down = [s for s in self.servers if not s.healthy]
            answered = await asyncio.gather(*(self._probe_one(s) for s in down))
            back = [server for server, ok in zip(down, answered) if ok and not server.healthy]
            # marked back together, after the round: woken at the first one back, the waiting
            # requests would all go to it while the others, back too, are still to be probed
            for server in back:
                server.healthy = True
                server.consecutive_failures = 0
                logger.warning("rollout server %s is back", server.url)
            if back:
                self._all_out_reported = False
                await self._notify()

    async def _probe_one(self, server: ServerState) -> bool:
        """Whether ``server`` answers ``GET /v1/models`` (below 500) within ``models_timeout``."""
        try:
            resp = await self._get_models(server)
        except (httpx.HTTPError, OSError, TimeoutError, ReplyError):
            return False
        return resp.status_code < 500

    # --- one request ------------------------------------------------------------------------------

    def _body(
        self, state: RolloutState, params: SampleParams, n: int, model: str, first: int = 0
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, **params.to_body(), "n": n}
        if params.seed is not None and first:
            # a group sent as several requests: each its own seed, or a seeded server would
            # answer every request of one with the same sample
            body["seed"] = params.seed + first
        if self.config.endpoint == "chat":
            body["messages"] = state.message
            if self.config.logprobs:
                body.setdefault("logprobs", True)
                # OpenAI's own field; llama.cpp's server answers no logprobs without it
                body.setdefault("top_logprobs", 0)
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
                    resp = await bounded_request(
                        self._clients[server.url],
                        "POST",
                        server.url + path,
                        json=body,
                        deadline=timeout,
                        max_bytes=self.config.max_reply_bytes,
                    )
                    reply: Any = await resp.json() if resp.ok else None
                except (httpx.ConnectError, ConnectionRefusedError) as exc:
                    last = f"{server.url}: {type(exc).__name__}: {exc}"
                    server.failures += 1
                    await self._take_out(server, last)
                except TimeoutError:
                    last = f"{server.url}: no whole reply within {timeout:.3g} s (total deadline)"
                    await self._failed(server, last)
                except (httpx.TransportError, OSError, ReplyError) as exc:
                    last = f"{server.url}: {type(exc).__name__}: {exc}".rstrip(": ")
                    if isinstance(exc, ReplyTooLarge):
                        last += " (raise max_reply_bytes, or ask fewer samples per request: sample_params.n)"
                    await self._failed(server, last)
                else:
                    if resp.ok:
                        server.consecutive_failures = 0
                        if not isinstance(reply, dict):
                            raise GenerationError(
                                f"{server.url}: the reply is a {type(reply).__name__}, not an object"
                            )
                        return reply
                    last = f"{server.url}: HTTP {resp.status_code}: {resp.head()!r}"
                    if resp.status_code not in RETRY_STATUS:
                        # a redirect too: it is never followed, and never taken for an answer
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
        per_request = 1 if self.ignores_n else (params.n or len(states))
        starts = range(0, len(states), per_request)
        await asyncio.gather(
            *(self._generate_chunk(states[i : i + per_request], params, model, i) for i in starts)
        )
        return states

    async def generate(
        self, state: RolloutState, sample_params: SampleParams | dict[str, Any] | None = None
    ) -> RolloutState:
        """One sample for ``state``."""
        params = as_sample_params(sample_params).model_copy(update={"n": 1})
        await self.generate_group([state], params)
        return state

    async def _generate_chunk(
        self, chunk: list[RolloutState], params: SampleParams, model: str, first: int = 0
    ) -> None:
        """Generate ``chunk`` (the group's samples from index ``first`` on) in one request; when the
        server answers fewer choices than asked, the rest go as requests of one."""
        start = time.perf_counter()
        body = self._body(chunk[0], params, len(chunk), model, first)
        try:
            reply = await self.request(body)
            choices = ordered_choices(reply, len(chunk))
            parsed = [parse_choice(c, self.config.endpoint) for c in choices]
            shared_prompt_ids = reply.get("prompt_token_ids")
        except (GenerationError, KeyError, TypeError, AttributeError) as exc:
            self.stats.failed_requests += 1
            message = f"generation failed: {exc if isinstance(exc, GenerationError) else repr(exc)}"
            message += _token_id_prompt_hint(body, message)
            for state in chunk:
                _fail(state, message)
            return
        finally:
            self.stats.requests += 1
            self.stats.seconds += time.perf_counter() - start
        answered = chunk[: len(parsed)]
        usage = usage_counts(reply)
        for state, fields in zip(answered, parsed):
            if shared_prompt_ids is not None and "prompt_ids" not in fields:
                # each sample owns its lists; anything else is refused by the check below
                is_list = isinstance(shared_prompt_ids, list)
                fields["prompt_ids"] = list(shared_prompt_ids) if is_list else shared_prompt_ids
            self._apply(state, fields, params, usage if len(parsed) == 1 else {})
        tokens = usage.get("completion_tokens")
        if tokens is None:
            tokens = sum(len(s.response_ids or ()) for s in answered)
        self.stats.completion_tokens += tokens
        self.stats.samples += len(answered)
        rest = chunk[len(parsed) :]
        if rest:
            self._saw_n_ignored(len(chunk), len(parsed))
            offset = first + len(parsed)
            await asyncio.gather(
                *(self._generate_chunk([s], params, model, offset + i) for i, s in enumerate(rest))
            )

    def _apply(
        self, state: RolloutState, fields: dict[str, Any], params: SampleParams, usage: dict[str, int]
    ) -> None:
        """One checked choice on its sample; ``usage`` is the request's when it held only this sample."""
        problem = choice_problem(fields, self.config.vocab_size)
        if problem is not None:
            _fail_choice(state, fields, problem)
            return
        apply_generation(state, fields)
        if (
            self.tokenize_response is not None
            and state.status == Status.COMPLETED
            and state.response_ids is None
        ):
            # asked for by name (tokenize_responses): the server sent text only
            try:
                state.response_ids = self.tokenize_response(state, params)
            except Exception as exc:  # the local tokenizer's failure is this sample's, not the run's
                _fail(state, f"tokenize_responses: the local tokenizer failed: {type(exc).__name__}: {exc}")
                return
            state.logprobs = None  # one per token the server sampled: they need not match these ids
        if usage:
            # the only token counts a server without token ids gives (judger eval's rows show them)
            state.extra_fields["usage"] = dict(usage)
        # the response is never re-tokenized here: those ids need not be the ones the server sampled
        if self.tokenize is not None and state.prompt_ids is None:
            state.prompt_ids = self.tokenize((self.render_prompt or _plain_render)(state.message))

    def _saw_n_ignored(self, asked: int, got: int) -> None:
        """A server answered ``got`` of ``asked`` choices: from now on every sample goes as a request
        of one (said once; the requests of one each get their own seed when a seed is set)."""
        if self.ignores_n:
            return
        self.ignores_n = True
        logger.warning(
            "the rollout server answered %d choice(s) for n=%d (it ignores n, as llama.cpp's server "
            "does): from now on each sample goes as a request of one",
            got,
            asked,
        )

    def server_states(self) -> list[dict[str, Any]]:
        return [s.snapshot() for s in self.servers]


def _token_id_prompt_hint(body: dict[str, Any], message: str) -> str:
    """What to say after an HTTP error on a prompt sent as token ids: some servers take text only."""
    prompt = body.get("prompt")
    if "HTTP " not in message or not (isinstance(prompt, list) and prompt and isinstance(prompt[0], int)):
        return ""
    return (
        " (the prompt went as token ids; a server that takes text prompts only, as llama.cpp's, "
        "refuses them: use the chat endpoint, where the server applies its own chat template)"
    )


def _fail_choice(state: RolloutState, fields: dict[str, Any], problem: str) -> None:
    """A choice that failed its checks: the sample is FAILED, keeping only what can be shown."""
    text = fields.get("response")
    state.response = text if isinstance(text, str) else None
    finish = fields.get("finish_reason")
    state.finish_reason = finish if isinstance(finish, str) else None
    fail_invalid(state, problem)


def _plain_render(messages: Sequence[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages)
