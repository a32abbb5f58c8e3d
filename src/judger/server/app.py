"""The FastAPI app behind ``judger serve``: any judger, reachable from any trainer over HTTP.

Endpoints: ``POST /reward`` (the seeds' URL-handler protocol, so ``NativeJudger(reward_handler=
"http://host:port/reward")`` works unchanged), ``POST /judge`` (RolloutState in, reward out),
``POST /get_reward`` (OpenRLHF's remote reward protocol), ``GET /health``, ``GET /metrics``
(Prometheus). :class:`~judger.server.guard.GuardMiddleware` adds the token, size, body-read and
concurrency limits; starlette's ``TrustedHostMiddleware`` checks the ``Host`` header.

Request bodies are data: parsed and bounded in shape (:mod:`judger.server.body`) before any model
validates them, large ones off the event loop, and error replies never echo what was sent.
"""

from __future__ import annotations

import asyncio
import copy
import json
import math
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar
from urllib.parse import parse_qs

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import PlainTextResponse, Response
from pydantic_core import PydanticSerializationError, to_json
from starlette.middleware.trustedhost import TrustedHostMiddleware

from judger.core.errors import JudgeTimeoutError, RoutingError
from judger.core.failure import JudgeFailure, failure_of
from judger.core.judger import BaseJudger
from judger.core.rollout import RolloutState, Status
from judger.judgers.config import ComposedJudgerConfig, JudgerConfig, build_judger
from judger.presets.base import ScorerJudger
from judger.presets.inline import InlineScorerJudger
from judger.runtime.procpool import ProcessPool
from judger.server.batching import MicroBatcher
from judger.server.body import BodyError, BodyLimits, costly, echo, parse_json
from judger.server.guard import GuardMiddleware
from judger.server.metrics import ServerMetrics
from judger.server.models import (
    ErrorBody,
    GetRewardRequest,
    GetRewardResponse,
    HealthResponse,
    JudgedState,
    RewardRequest,
    RewardResponse,
)
from judger.server.openrlhf import GetRewardReader, judge_readable
from judger.server.requests import get_reward_states, judge_items_json, judge_states, reward_state
from judger.server.states import twin
from judger.server.statuses import REWARD_FAILURES, failure_status

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_IN_FLIGHT_REQUESTS = 512
DEFAULT_BODY_TIMEOUT = 30.0
DEFAULT_FAILURE_REWARD = 0.0
JUDGE_PATHS = ("/reward", "/judge", "/get_reward")
OPEN_PATHS = ("/health", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json")
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
PROMETHEUS_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# bodies above this size are parsed and validated on a thread, so the event loop keeps serving
INLINE_PARSE_BYTES = 64 * 1024
DEFAULT_LOG_KEYS = ("acc",)
PARSER_WORKERS = 2
# json.loads of a body within max_body_bytes takes well under a second; past this its parse is refused
PARSE_TIMEOUT = 30.0
LIGHT_FIELDS = ("reward", "status", "error_msg")

T = TypeVar("T")


def _failure_of(state: RolloutState, judger_name: str) -> dict[str, str] | None:
    failure = failure_of(state, judger_name)
    return (
        None
        if failure is None
        else {"judger": failure.judger, "kind": failure.kind, "message": failure.message}
    )


def _encode(content: Any) -> bytes:
    """JSON bytes: pydantic-core's encoder first (rewards are JSON-native; it writes a 64-state reply
    in a third of json.dumps's time), FastAPI's encoder for what it cannot write (numpy scalars)."""
    try:
        return to_json(content)
    except (PydanticSerializationError, TypeError, ValueError):
        data = json.dumps(jsonable_encoder(content, custom_encoder={Exception: str}), ensure_ascii=False)
        return data.encode()


def _json(content: Any, status_code: int = 200) -> Response:
    return Response(_encode(content), status_code=status_code, media_type="application/json")


def _flag(query: bytes, name: str) -> bool:
    """A boolean query parameter, read as FastAPI reads one; any other value is refused (422), not
    taken as false."""
    if not query:
        return False
    values = parse_qs(query.decode("latin-1"), keep_blank_values=True).get(name)
    if not values:
        return False
    value = values[-1].lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise BodyError(f"{name}: expected a boolean (true or false), got {echo(values[-1])}")


class _Recorder:
    """Counts judged samples into the metrics. Labels are server facts: the judger's own name(s)
    and outcome; nothing a client posted."""

    def __init__(self, metrics: ServerMetrics, judger_name: str) -> None:
        self.metrics = metrics
        self.judger_name = judger_name

    def record(self, state: RolloutState) -> dict[str, str] | None:
        failure = _failure_of(state, self.judger_name)
        if failure is not None:
            self.metrics.sample(failure["judger"], failure["kind"])
        else:
            verdict = state.reward.get("verdict") if state.reward else None
            self.metrics.sample(self.judger_name, "ok", verdict)
        return failure

    def record_outputs(self, outputs: list[Any]) -> list[dict[str, Any]]:
        """``/judge``'s light answers (reward, status, error_msg) for raw judger outputs -- a dict,
        or the exception of a failed sample -- counted as :meth:`record_many` counts states."""
        out: list[dict[str, Any]] = []
        plain_ok = 0
        for output in outputs:
            if type(output) is dict:
                out.append({"reward": output, "status": "completed", "error_msg": None})
                if "verdict" in output:
                    self.metrics.sample(self.judger_name, "ok", output["verdict"])
                else:
                    plain_ok += 1
            else:
                failure = JudgeFailure.from_exception(output, self.judger_name)
                out.append({"reward": None, "status": "failed", "error_msg": failure.message})
                self.metrics.sample(failure.judger, failure.kind)
        if plain_ok:
            self.metrics.sample(self.judger_name, "ok", n=plain_ok)
        return out

    def record_many(self, states: list[RolloutState]) -> list[dict[str, str] | None]:
        """:meth:`record` for a batch: successes without a verdict are counted once, together."""
        failures: list[dict[str, str] | None] = []
        plain_ok = 0
        for state in states:
            if state.status is not Status.FAILED and not (state.reward and "verdict" in state.reward):
                plain_ok += 1
                failures.append(None)
            else:
                failures.append(self.record(state))
        if plain_ok:
            self.metrics.sample(self.judger_name, "ok", n=plain_ok)
        return failures


def _posted_states_schema(spec: dict[str, Any]) -> None:
    """``/judge`` takes RolloutStates as the judger may judge them: its schema says what the server
    refuses (a status other than init/completed, a posted reward or error_msg, a judge_failure),
    and that a list of them is taken too, so that the documented schema is the one enforced."""
    schemas = spec["components"]["schemas"]
    posted = copy.deepcopy(schemas["RolloutState"])
    posted["title"] = "PostedRolloutState"
    fields = posted["properties"]
    fields["status"] = {"enum": [Status.INIT.value, Status.COMPLETED.value], "default": Status.INIT.value}
    for name in ("reward", "error_msg"):
        fields[name] = {"type": "null", "default": None, "description": "written by the judger"}
    fields["extra_fields"] = {**fields["extra_fields"], "not": {"required": ["judge_failure"]}}
    schemas["PostedRolloutState"] = posted
    ref = {"$ref": "#/components/schemas/PostedRolloutState"}
    body = spec["paths"]["/judge"]["post"]["requestBody"]["content"]["application/json"]
    body["schema"] = {"anyOf": [ref, {"type": "array", "items": ref}]}


def _request_body(model: type[Any]) -> dict[str, Any]:
    ref = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": ref}}}}


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
    allowed_hosts: Sequence[str] | None = None,
    failure_reward: float | None = DEFAULT_FAILURE_REWARD,
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
      one client may fill every judging slot and then gets 503s, as any client would).
    - ``allowed_hosts``: accepted ``Host`` header values (400 otherwise; ``None``: any host).
    - ``failure_reward``: the reward ``/get_reward`` gives a sample the judger failed on (default
      0.0; the failure is flagged in ``extra_logs["judge_failed"]`` and described in
      ``failures``). ``None``: a request with a failed sample answers 500 (504 if it timed out),
      so OpenRLHF (one sample a request) retries it.
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
    if max_body_bytes < 1 or max_concurrency < 1:
        raise ValueError("max_body_bytes and max_concurrency must be >= 1")
    if body_timeout <= 0:
        raise ValueError("body_timeout must be > 0")
    if failure_reward is not None and not math.isfinite(failure_reward):
        raise ValueError(f"failure_reward must be a finite number or None, got {failure_reward!r}")
    limits = body_limits or BodyLimits(max_string_chars=max_body_bytes)
    live = judger if isinstance(judger, BaseJudger) else build_judger(judger)
    name = live.get_judger_name()
    metrics = ServerMetrics()
    recorder = _Recorder(metrics, name)
    if micro_batch is None:
        # only where a batch keeps per-sample deadlines: a generic Judger's batch call shares one
        # deadline, so one slow request could time out the requests batched with it

        micro_batch = isinstance(live, ScorerJudger)
    batcher = MicroBatcher(live, window=batch_window, max_batch=max_batch if micro_batch else 1)
    field_judger = live if isinstance(live, InlineScorerJudger) and live.judges_fields() else None
    log_keys = tuple(dict.fromkeys(k for k in log_keys if k not in ("score", "judge_failed")))
    reader = get_reward_reader or GetRewardReader()
    reader.check(live)

    def read_queries(body: Any) -> list[RolloutState]:
        return get_reward_states(body, reader)

    parsers: list[ProcessPool] = []  # the processes that parse costly bodies, started on first need

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        for pool in parsers:
            await pool.aclose()
        if close_judger:
            await live.aclose()

    app = FastAPI(
        title="judger",
        summary=f"Rewards from judger {name!r}",
        description=(
            "Score LLM rollouts over HTTP. `/reward` speaks the URL-handler protocol of "
            "`NativeJudger`, `/judge` takes RolloutState objects, `/get_reward` speaks OpenRLHF's "
            "remote reward protocol."
        ),
        lifespan=lifespan,
    )
    app.state.judger = live
    app.state.metrics = metrics
    app.state.batcher = batcher

    async def parsed(body: bytes, build: Callable[[Any], T]) -> T:
        if len(body) <= INLINE_PARSE_BYTES:
            return build(parse_json(body, limits))
        if costly(body):
            # parsed where holding the interpreter stalls no one; a body over a limit is refused
            # there and only the error comes back
            if not parsers:
                # judger's own ProcessPool, not concurrent.futures: a lost worker (OOM killer) is
                # replaced, where a ProcessPoolExecutor breaks for every later body; and a pool of its
                # own, not shared_pool, so no body waits behind the judger's scoring calls there
                parsers.append(
                    ProcessPool(
                        PARSER_WORKERS,
                        timeout=PARSE_TIMEOUT,
                        max_input_bytes=max_body_bytes + 64 * 1024,
                        name="body_parser",
                        # spawn, as before: this pool must not be the one that starts multiprocessing's
                        # fork server, whose preload (math_verify) the judger's shared pool sets
                        start_method="spawn",
                    )
                )
            try:
                value = await parsers[0].run(parse_json, body, limits)
            except JudgeTimeoutError:
                raise BodyError(f"body: not parsed within {PARSE_TIMEOUT:g} s") from None
            return await asyncio.to_thread(build, value)
        return await asyncio.to_thread(lambda: build(parse_json(body, limits)))

    @app.exception_handler(BodyError)
    async def _refused(request: Request, exc: BodyError) -> Response:
        return _json({"detail": str(exc), "message": str(exc)}, exc.status)

    @app.exception_handler(RoutingError)
    async def _unroutable(request: Request, exc: RoutingError) -> Response:
        # the posted data_source names no branch: the request is wrong, not the server
        message = str(exc)[:2000]
        return _json({"detail": message, "message": message}, 422)

    @app.exception_handler(Exception)
    async def _crashed(request: Request, exc: Exception) -> Response:
        # a judger built with on_error="raise", or a configuration error (an unroutable data_source)
        detail = f"judging raised {type(exc).__name__}: {exc}"[:2000]
        return _json({"detail": detail}, 500)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        message = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()) if p != 'body') or 'body'}: {e.get('msg')}"
            for e in exc.errors()[:10]
        )
        return _json({"detail": message, "message": message}, 422)

    failure_responses: dict[int | str, dict[str, Any]] = {
        500: {"model": ErrorBody, "description": "the judger failed on this sample"},
        504: {"model": ErrorBody, "description": "the judger timed out on this sample"},
        400: {"model": ErrorBody, "description": "malformed JSON, or a Host header not served here"},
        401: {"model": ErrorBody, "description": "missing or wrong bearer token"},
        408: {"model": ErrorBody, "description": "the body did not arrive within the body timeout"},
        413: {"model": ErrorBody, "description": "request body too large"},
        422: {"model": ErrorBody, "description": "invalid body: the message names the field"},
        429: {"model": ErrorBody, "description": "this client has too many requests open"},
        503: {"model": ErrorBody, "description": "too many requests in flight; retry after Retry-After s"},
    }

    @app.post(
        "/reward",
        response_model=RewardResponse,
        responses={
            **{k: v for k, v in failure_responses.items() if k != 500},
            **{k: {"model": ErrorBody, "description": d} for k, d in REWARD_FAILURES.items()},
        },
        openapi_extra=_request_body(RewardRequest),
    )
    async def reward(request: Request) -> Any:
        """Judge one sample: ``{"response", "label", "extra_info", "data_source"}`` -> the reward dict.

        A sample the judger fails on answers 422 (504 for a timeout, 503 when the server rather than
        the sample failed) with the failure, never a made-up score; clients do not retry a 422.
        ``extra_info["question"]`` (or ``["prompt"]``), when present, becomes the user message
        (LLM verifiers read the question from it). Concurrent requests are judged together as one
        batch.
        """
        return _json(*reversed(await do_reward(await request.body(), b"")))

    async def do_reward(body: bytes, query: bytes) -> tuple[int, Any]:
        state = await batcher.judge(await parsed(body, reward_state))
        failure = recorder.record(state)
        if failure is not None:
            return failure_status(failure), {"detail": failure["message"], "judge_failure": failure}
        return 200, state.reward

    @app.post(
        "/judge",
        response_model=JudgedState | list[JudgedState],
        responses={k: v for k, v in failure_responses.items() if k not in (500, 504)},
        openapi_extra=_request_body(RolloutState),
    )
    async def judge(request: Request, full: bool = False) -> Any:
        """Judge one RolloutState or a list of them. The reply has, per state, ``reward``,
        ``status`` and ``error_msg`` (``?full=true``: the whole judged states). Failures come back
        as ``status="failed"`` with ``error_msg`` and never fail the request. A posted ``reward``,
        ``error_msg``, ``extra_fields.judge_failure`` or a status other than init/completed is
        refused (422): those are the judger's to write."""
        return _json(*reversed(await do_judge(await request.body(), b"full=true" if full else b"")))

    async def do_judge(body: bytes, query: bytes) -> tuple[int, Any]:
        full = _flag(query, "full")
        direct = judge_items_json(body, limits) if len(body) <= INLINE_PARSE_BYTES else None
        if direct is not None:
            items, many = direct
            if field_judger is not None and not full and len(items) > 1 and twin().usable:
                # an inline preset scores the validated fields: no RolloutState is built
                out = recorder.record_outputs(field_judger.score_fields(items))
                return 200, out if many else out[0]
            states = twin().adopt_all(items)
        else:
            states, many = await parsed(body, judge_states)
        if len(states) == 1:
            judged = [await batcher.judge(states[0])]
        else:
            judged = await live.batch_judge(states) if states else []
        recorder.record_many(judged)
        if full:
            out = [s.model_dump(mode="json") for s in judged]
        else:
            failed = Status.FAILED
            out = [
                {
                    "reward": s.reward,
                    "status": "failed" if s.status is failed else "completed",
                    "error_msg": s.error_msg,
                }
                for s in judged
            ]
        return 200, out if many else out[0]

    @app.post(
        "/get_reward",
        response_model=GetRewardResponse,
        responses=failure_responses,
        openapi_extra=_request_body(GetRewardRequest),
    )
    async def get_reward(request: Request) -> Any:
        """OpenRLHF: ``{"query", "prompts", "labels", "data_sources"}`` -> ``{"rewards", "scores",
        "extra_logs", "failures"}``. Every reward is a number: a failed sample gets
        ``failure_reward`` (default 0.0), ``extra_logs["judge_failed"]`` 1.0 and its failure in
        ``failures``. A label ``""`` (what OpenRLHF sends for a sample without one) is no label.
        ``data_sources`` routes each sample in a composed judger."""
        return _json(*reversed(await do_get_reward(await request.body(), b"")))

    async def judge_many(states: list[RolloutState]) -> list[RolloutState]:
        return await live.batch_judge(states) if len(states) > 1 else [await batcher.judge(s) for s in states]

    async def do_get_reward(body: bytes, query: bytes) -> tuple[int, Any]:
        states = await parsed(body, read_queries)
        judged = await judge_readable(states, judge_many)
        failures = recorder.record_many(judged)
        if failure_reward is None and any(failures):
            timeout = all(f is None or f["kind"] == "timeout" for f in failures)
            detail = "; ".join(f"[{i}] {f['message']}" for i, f in enumerate(failures) if f)[:2000]
            return 504 if timeout else 500, {"detail": detail, "failures": failures}
        rewards: list[float] = []
        logs: dict[str, list[float]] = {key: [] for key in log_keys}
        flags: list[float] = []
        for state, failure in zip(judged, failures):
            reward_dict = state.reward if failure is None and state.reward else {}
            score = reward_dict.get("score")
            rewards.append(
                float(score) if failure is None and score is not None else float(failure_reward or 0.0)
            )
            flags.append(0.0 if failure is None else 1.0)
            for key, column in logs.items():
                value = reward_dict.get(key)
                column.append(float(value) if isinstance(value, (int, float)) else 0.0)
        logs["judge_failed"] = flags
        return 200, {"rewards": rewards, "scores": list(rewards), "extra_logs": logs, "failures": failures}

    @app.get("/health", response_model=HealthResponse)
    async def health() -> Any:
        """Liveness: always answers (no token, no concurrency limit)."""
        return _json(
            {
                "status": "ok",
                "judger": name,
                "in_flight": metrics.in_flight,
                "max_concurrency": max_concurrency,
                "uptime_s": round(time.time() - metrics.started, 3),
            }
        )

    @app.get("/metrics", response_class=PlainTextResponse)
    async def prometheus() -> PlainTextResponse:
        """Prometheus text format: requests, latency, rejections, samples by outcome, verdicts."""
        return PlainTextResponse(metrics.render(), media_type=PROMETHEUS_TYPE)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = get_openapi(
                title=app.title,
                version=app.version,
                summary=app.summary,
                description=app.description,
                routes=app.routes,
            )
            schemas = spec.setdefault("components", {}).setdefault("schemas", {})
            for model in (RewardRequest, GetRewardRequest, RolloutState):
                schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
                schemas.update(schema.pop("$defs", {}))
                schemas[model.__name__] = schema
            _posted_states_schema(spec)
            app.openapi_schema = spec
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    app.add_middleware(
        GuardMiddleware,
        metrics=metrics,
        token=token,
        max_body_bytes=max_body_bytes,
        max_concurrency=max_concurrency,
        retry_after=retry_after,
        limited_paths=JUDGE_PATHS,
        open_paths=OPEN_PATHS,
        body_timeout=body_timeout,
        max_client_requests=max_client_requests or 2 * max_concurrency,
        handlers={"/reward": do_reward, "/judge": do_judge, "/get_reward": do_get_reward},
        encode=_encode,
    )
    if allowed_hosts is not None:
        # outermost: a request for another host (DNS rebinding) is refused before anything else
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))
    return app
