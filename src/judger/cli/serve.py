"""`judger serve`: serve a judger config over HTTP (FastAPI on uvicorn)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from judger.cli import serve_limits

TOKEN_ENV = "JUDGER_SERVER_TOKEN"
_SPEC_ENV = "JUDGER_SERVE_SPEC"  # how --workers N hands the spec to each worker process
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]")
_ANY_ADDRESS = ("0.0.0.0", "::", "")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of `judger serve`, one group per concern; must stay cheap (no heavy
    imports here)."""
    _add_source_arguments(parser.add_argument_group("what to serve"))
    _add_access_arguments(parser.add_argument_group("address and access"))
    _add_limit_arguments(parser.add_argument_group("request limits"))
    serve_limits.add_arguments(parser)
    _add_get_reward_arguments(parser.add_argument_group("/get_reward (OpenRLHF)"))
    _add_runtime_arguments(parser.add_argument_group("serving"))


def _add_source_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "config",
        nargs="?",
        help="the judger config: path/to/file.py[:NAME] or package.module:NAME "
        "(NAME defaults to 'judger_config', or the only config the file defines)",
    )
    group.add_argument(
        "--preset", help="serve a preset config class from judger.presets, e.g. GSM8KJudgerConfig"
    )
    group.add_argument(
        "--set",
        dest="overrides",
        action="append",
        metavar="KEY=VALUE",
        help="set a config field (JSON value or string); repeatable, e.g. --set timeout=10",
    )


def _add_access_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)"
    )
    group.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    group.add_argument("--workers", type=int, default=1, help="server processes (default 1)")
    group.add_argument(
        "--token",
        help=f"require 'Authorization: Bearer TOKEN'; visible to other users in `ps`: prefer ${TOKEN_ENV} "
        "or --token-file",
    )
    group.add_argument(
        "--token-file", metavar="PATH", help="read the token from this file (first line; kept out of `ps`)"
    )
    group.add_argument(
        "--allowed-host",
        dest="allowed_hosts",
        action="append",
        metavar="HOST",
        help="a Host header value the server answers (repeatable; '*' for any). Default: the loopback "
        "names when bound to loopback, else the --host address",
    )


def _add_limit_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--max-body-bytes", type=int, default=8 * 1024 * 1024, help="larger requests get 413 (default 8 MiB)"
    )
    group.add_argument(
        "--max-concurrency",
        type=int,
        default=512,
        help="judge requests served at once per worker; more get 503 + Retry-After (default 512)",
    )
    group.add_argument(
        "--max-client-requests",
        type=int,
        default=None,
        help="judge requests one client address may have open, body reading included; more get 429 "
        "(default 2 x --max-concurrency)",
    )
    group.add_argument(
        "--max-client-body-bytes",
        type=int,
        default=None,
        help="bytes of judge request bodies one client address may have in memory at once, read or "
        "being judged; more get 429 (default: 1/16 of the memory the server may use)",
    )
    group.add_argument(
        "--body-timeout",
        type=float,
        default=30.0,
        help="seconds a client has to send a request body; slower ones get 408 (default 30)",
    )


def _add_get_reward_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--failure-reward",
        default="lowest",
        help="the reward /get_reward (and slime's /reward body) gives a sample the judger failed on: "
        "'lowest' (default: the lowest score the judger gives it, 0.0 where it declares none) or a "
        "number. ('none' is refused: OpenRLHF 0.11 crashes its training step on a reward it could "
        "not get)",
    )
    group.add_argument(
        "--log-key",
        dest="log_keys",
        action="append",
        metavar="KEY",
        help="a reward field /get_reward reports in extra_logs (repeatable; default: acc)",
    )
    group.add_argument(
        "--tokenizer",
        metavar="PATH",
        help="/get_reward: the tokenizer directory of the policy (OpenRLHF's --pretrain); its special-token "
        "text is stripped from the end of each response, as OpenRLHF sends it decoded with special "
        "tokens (default: the end markers of the common chat templates, said at start-up)",
    )
    group.add_argument(
        "--strip-text",
        dest="strip_texts",
        action="append",
        metavar="TEXT",
        help="/get_reward: a text to strip from the end of each response, e.g. '<|im_end|>' (repeatable; "
        "replaces the default end markers)",
    )
    group.add_argument(
        "--data-source",
        metavar="NAME",
        help="/get_reward: the data_source of every query that carries none (OpenRLHF sends none); "
        "a routing config needs it, or --data-sources-sent",
    )
    group.add_argument(
        "--data-sources-sent",
        action="store_true",
        help="/get_reward: the client sends data_sources (OpenRLHF does not), so a routing config may serve",
    )


def _add_runtime_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--batch-window",
        type=float,
        default=0.0,
        help="seconds concurrent single requests wait to be judged as one batch (default 0: those "
        "arriving in the same event-loop turn)",
    )
    group.add_argument(
        "--graceful-timeout",
        type=float,
        default=30.0,
        help="on shutdown, seconds to let requests in flight finish (default 30)",
    )
    group.add_argument(
        "--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"]
    )
    group.add_argument(
        "--access-log", action="store_true", help="log every request (off by default: it costs)"
    )


class _UsageError(ValueError):
    pass


def _token(args: argparse.Namespace) -> str | None:
    if args.token and args.token_file:
        raise _UsageError("give --token or --token-file, not both")
    if args.token:
        print(
            f"judger serve: warning: --token is visible to every user in `ps`; use ${TOKEN_ENV} or "
            "--token-file",
            file=sys.stderr,
        )
        return str(args.token)
    if args.token_file:
        try:
            with open(args.token_file, encoding="utf-8") as fh:
                token = fh.readline().strip()
        except OSError as exc:
            raise _UsageError(f"--token-file: cannot read {args.token_file}: {exc.strerror or exc}") from None
        if not token:
            raise _UsageError(f"--token-file: {args.token_file} is empty")
        return token
    return os.environ.get(TOKEN_ENV) or None


def _allowed_hosts(args: argparse.Namespace) -> list[str] | None:
    if args.allowed_hosts:
        return None if "*" in args.allowed_hosts else list(args.allowed_hosts)
    if args.host in _LOOPBACK:
        return list(_LOOPBACK_NAMES)
    if args.host in _ANY_ADDRESS:
        return None  # which names reach this machine is unknown: --allowed-host narrows it
    return [args.host]


NO_FAILURE_REWARD = (
    "--failure-reward none is refused: it answered 5xx for a failed sample, and OpenRLHF 0.11 retries "
    "that 5 times, then leaves the sample's reward None and crashes its training step on it "
    "(Experience.rewards.to() in compute_advantages_and_returns). Use 'lowest' (the default: a "
    "failure never pays more than a wrong answer) or a number; the failure is still reported, in "
    "extra_logs['judge_failed'] and 'failures'"
)


def _failure_reward(text: str) -> float | str:
    from judger.core.failure_reward import LOWEST, check_failure_reward

    word = text.strip().lower()
    if word in ("none", "null"):
        raise _UsageError(NO_FAILURE_REWARD)
    if word == LOWEST:
        return LOWEST
    try:
        return check_failure_reward(float(text), "--failure-reward")
    except ValueError:
        raise _UsageError(f"--failure-reward: expected 'lowest' or a finite number, got {text!r}") from None


def _spec(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "config": args.config,
        "preset": args.preset,
        "overrides": args.overrides or [],
        "token": _token(args),
        "max_body_bytes": args.max_body_bytes,
        "max_concurrency": args.max_concurrency,
        "max_client_requests": args.max_client_requests,
        "max_client_body_bytes": args.max_client_body_bytes,
        "body_timeout": args.body_timeout,
        "allowed_hosts": _allowed_hosts(args),
        "failure_reward": _failure_reward(args.failure_reward),
        "batch_window": args.batch_window,
        "log_keys": args.log_keys or ["acc"],
        "get_reward": {
            "tokenizer": args.tokenizer,
            "strip": args.strip_texts or [],
            "data_source": args.data_source,
            "data_sources_sent": args.data_sources_sent,
        },
    }


def _target(spec: dict[str, Any]) -> Any:
    from judger.presets.loading import load_preset, load_target, parse_overrides

    overrides = parse_overrides(spec["overrides"])
    if spec["preset"]:
        return load_preset(spec["preset"], overrides)
    return load_target(spec["config"], overrides)


def _get_reward_reader(spec: dict[str, Any]) -> Any:
    from judger.server.openrlhf import GetRewardReader

    return GetRewardReader.build(**spec["get_reward"])


def _app(spec: dict[str, Any]) -> Any:
    from judger.cli.pools import start_pools
    from judger.server.app import create_app

    app = create_app(
        _target(spec),
        token=spec["token"],
        max_body_bytes=spec["max_body_bytes"],
        max_concurrency=spec["max_concurrency"],
        max_client_requests=spec["max_client_requests"],
        max_client_body_bytes=spec["max_client_body_bytes"],
        body_timeout=spec["body_timeout"],
        allowed_hosts=spec["allowed_hosts"],
        failure_reward=spec["failure_reward"],
        batch_window=spec["batch_window"],
        log_keys=spec["log_keys"],
        get_reward_reader=_get_reward_reader(spec),
    )
    # worker processes start now, and /health answers once they do: not on the first request,
    # which would wait seconds for them
    start_pools(app.state.server.judger, wait=True)
    return app


def app_from_env() -> Any:
    """The app of one ``--workers N`` process (uvicorn factory)."""
    return _app(json.loads(os.environ[_SPEC_ENV]))


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except KeyboardInterrupt:  # Ctrl-C while the judger was still loading: no traceback
        print("judger serve: interrupted during start-up", file=sys.stderr)
        return 130


def _run(args: argparse.Namespace) -> int:
    if bool(args.config) == bool(args.preset):
        print("judger serve: give a CONFIG or --preset NAME (one of them)", file=sys.stderr)
        return 2
    if args.workers < 1:
        print("judger serve: --workers must be >= 1", file=sys.stderr)
        return 2
    try:
        spec = _spec(args)
        connection_options = serve_limits.uvicorn_options(args)
    except (_UsageError, ValueError) as exc:
        print(f"judger serve: {exc}", file=sys.stderr)
        return 2
    import uvicorn

    if args.host not in _LOOPBACK and not spec["token"]:
        print(
            f"judger serve: warning: binding {args.host} without a token; anyone who can reach this "
            f"port can use the judger (set ${TOKEN_ENV} or --token-file)",
            file=sys.stderr,
        )
    try:
        reader = _get_reward_reader(spec)
        if args.workers == 1:
            app: Any = _app(spec)
            factory = False
        else:
            _target(spec)  # fail here, once, rather than in every worker
            os.environ[_SPEC_ENV] = json.dumps(spec)
            app, factory = "judger.cli.serve:app_from_env", True
    except (ValueError, TypeError, ImportError, OSError) as exc:
        print(f"judger serve: {exc}", file=sys.stderr)
        return 2
    print(f"judger serve: {reader.describe()}", file=sys.stderr)
    # uvicorn's own limits: idle keep-alive connections close after 5 s and headers are capped by
    # h11/httptools. It has no header or body-read deadline and no per-client cap: the protocol of
    # judger.server.connections adds the header deadline and connection caps, GuardMiddleware the
    # rest. limit_concurrency stays off: beyond it uvicorn answers 503 to /health too.
    uvicorn.run(
        app,
        factory=factory,
        host=args.host,
        port=args.port,
        workers=args.workers if args.workers > 1 else None,
        log_level=args.log_level,
        access_log=args.access_log,
        timeout_graceful_shutdown=args.graceful_timeout,
        timeout_keep_alive=5,
        **connection_options,
    )
    return 0
