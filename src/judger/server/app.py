"""The FastAPI app behind ``judger serve``: any judger, reachable from any trainer over HTTP.

:func:`create_app` is a small factory. Each protocol lives in its own module of
:mod:`judger.server.routes` (``/reward``, ``/judge``, ``/get_reward``, and ``ops`` for
``/health`` and ``/metrics``); what they share (the judger, batcher, metrics, limits) is one
:class:`~judger.server.context.ServerContext` on ``app.state.server``, which routes take as a
FastAPI dependency. :class:`~judger.server.guard.GuardMiddleware` adds the token, size, body-read
and concurrency limits in front of every route; starlette's ``TrustedHostMiddleware`` checks the
``Host`` header.

Request bodies are data: parsed and bounded in shape (:mod:`judger.server.body`) before any model
validates them, large ones off the event loop, and error replies never echo what was sent.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.middleware.trustedhost import TrustedHostMiddleware

from judger.core.failure_reward import FailureRewardSetting
from judger.core.judger import BaseJudger
from judger.judgers.config import ComposedJudgerConfig, JudgerConfig, build_judger
from judger.server.body import BodyLimits
from judger.server.context import (
    DEFAULT_FAILURE_REWARD,
    DEFAULT_LOG_KEYS,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_IN_FLIGHT_REQUESTS,
    ServerContext,
    build_context,
    check_options,
)
from judger.server.guard import GuardMiddleware
from judger.server.openapi import openapi
from judger.server.openrlhf import GetRewardReader
from judger.server.replies import encode, install_error_handlers
from judger.server.routes import JUDGE_ROUTES, ops

__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_FAILURE_REWARD",
    "DEFAULT_LOG_KEYS",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_IN_FLIGHT_REQUESTS",
    "JUDGE_PATHS",
    "OPEN_PATHS",
    "create_app",
    "guard_app",
    "server_app",
]

DEFAULT_BODY_TIMEOUT = 30.0
JUDGE_PATHS = tuple(route.path for route in JUDGE_ROUTES)
OPEN_PATHS = ("/health", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json")
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


def create_app(
    judger: BaseJudger | JudgerConfig | ComposedJudgerConfig,
    *,
    token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_concurrency: int = DEFAULT_MAX_IN_FLIGHT_REQUESTS,
    retry_after: float = 1.0,
    close_judger: bool = True,
    body_limits: BodyLimits | None = None,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
    max_client_requests: int | None = None,
    max_client_body_bytes: int | None = None,
    allowed_hosts: Sequence[str] | None = None,
    failure_reward: FailureRewardSetting | None = DEFAULT_FAILURE_REWARD,
    batch_window: float = 0.0,
    max_batch: int = 256,
    log_keys: Sequence[str] = DEFAULT_LOG_KEYS,
    micro_batch: bool | None = None,
    get_reward_reader: GetRewardReader | None = None,
) -> FastAPI:
    """Serve ``judger`` (a built judger, or a config built here) over HTTP.

    - ``token``: required as ``Authorization: Bearer <token>`` on every endpoint but /health and
      the docs.
    - ``max_body_bytes``: larger requests get 413. ``body_limits``: shape limits of a JSON body
      (keys per object, nodes, depth, key and string length; 422 beyond).
    - ``body_timeout``: seconds a client has to send a judge request's whole body (408 beyond).
    - ``max_concurrency``: judge requests served at once; more get 503 with
      ``Retry-After: retry_after``. ``max_client_requests``: judge requests one client address may
      have open at once, body reading included (429 beyond; default ``2 * max_concurrency``:
      one client may fill every judging slot and then gets 503s, as any client would), holding at
      most ``max_client_body_bytes`` of bodies (429 beyond; default: 1/16 of the server's memory).
    - ``allowed_hosts``: accepted ``Host`` header values (400 otherwise; ``None``: any host).
    - ``failure_reward``: the reward ``/get_reward`` gives a sample the judger failed on (default
      ``"lowest"``: the lowest score the judger gives that sample, 0.0 where it declares none, so
      a failure never pays more than a wrong answer; or a number; the failure is flagged in
      ``extra_logs["judge_failed"]`` and described in ``failures``). ``None``: a request with a
      failed sample answers 500 (504 if it timed out), so OpenRLHF (one sample a request) retries it.
    - ``log_keys``: reward fields ``/get_reward`` reports in ``extra_logs`` (default ``acc``), one
      number per sample, 0.0 where the field is missing or judging failed. The keys are the same in
      every reply: OpenRLHF merges the ``extra_logs`` of all samples of a step and fails on a
      key that only some of them have.
    - ``batch_window`` / ``max_batch``: concurrent single requests arriving within the window
      (0: the same event-loop turn) are judged as one batch of at most ``max_batch``.
      ``micro_batch``: whether to (default: for preset judgers, whose batches keep a deadline per
      sample; a generic Judger's batch call shares one deadline, so it is judged one by one).
    - ``get_reward_reader``: how ``/get_reward`` reads OpenRLHF's queries (special-token text to strip, the
      data_source of queries without one); a query that does not start with its prompt is always
      a failed sample (:mod:`judger.server.openrlhf`).

    The judger is closed when the server shuts down unless ``close_judger`` is False.
    """
    check_options(max_body_bytes, max_concurrency, failure_reward)
    if body_timeout <= 0:
        raise ValueError("body_timeout must be > 0")
    context = build_context(
        judger if isinstance(judger, BaseJudger) else build_judger(judger),
        max_body_bytes=max_body_bytes,
        max_concurrency=max_concurrency,
        body_limits=body_limits,
        failure_reward=failure_reward,
        batch_window=batch_window,
        max_batch=max_batch,
        log_keys=log_keys,
        micro_batch=micro_batch,
        get_reward_reader=get_reward_reader,
        close_judger=close_judger,
    )
    app = server_app(context)
    guard_app(
        app,
        context,
        token=token,
        retry_after=retry_after,
        body_timeout=body_timeout,
        max_client_requests=max_client_requests,
        max_client_body_bytes=max_client_body_bytes,
        allowed_hosts=allowed_hosts,
    )
    return app


def guard_app(
    app: FastAPI,
    context: ServerContext,
    *,
    token: str | None,
    retry_after: float,
    body_timeout: float,
    max_client_requests: int | None,
    allowed_hosts: Sequence[str] | None,
    max_client_body_bytes: int | None = None,
) -> None:
    """Put the guards in front of every route of ``app``: :class:`GuardMiddleware` answers the
    judging protocols itself, from the body it has read, through their handlers bound to
    ``context``; ``TrustedHostMiddleware`` when ``allowed_hosts`` is given."""
    if max_client_body_bytes is not None and max_client_body_bytes < 1:
        raise ValueError(f"max_client_body_bytes must be >= 1, got {max_client_body_bytes}")
    app.add_middleware(
        GuardMiddleware,
        metrics=context.metrics,
        token=token,
        max_body_bytes=context.parser.max_body_bytes,
        max_concurrency=context.max_concurrency,
        retry_after=retry_after,
        limited_paths=JUDGE_PATHS,
        open_paths=OPEN_PATHS,
        body_timeout=body_timeout,
        max_client_requests=max_client_requests or 2 * context.max_concurrency,
        max_client_body_bytes=max_client_body_bytes,
        handlers={route.path: functools.partial(route.handle, context) for route in JUDGE_ROUTES},
        encode=encode,
    )
    if allowed_hosts is not None:
        # outermost: a request for another host (DNS rebinding) is refused before anything else
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    yield
    await app.state.server.aclose()


def server_app(context: ServerContext) -> FastAPI:
    """The FastAPI app of ``context``: every protocol's router, the error replies and the OpenAPI
    document, without the guards (:func:`create_app` adds them)."""
    app = FastAPI(
        title="judger",
        summary=f"Rewards from judger {context.name!r}",
        description=(
            "Score LLM rollouts over HTTP. `/reward` speaks the URL-handler protocol of "
            "`NativeJudger`, `/judge` takes RolloutState objects, `/get_reward` speaks OpenRLHF's "
            "remote reward protocol."
        ),
        lifespan=_lifespan,
    )
    context.attach(app)
    for route in JUDGE_ROUTES:
        app.include_router(route.router)
    app.include_router(ops.router)
    install_error_handlers(app)
    app.openapi = functools.partial(openapi, app)  # type: ignore[method-assign]
    return app
