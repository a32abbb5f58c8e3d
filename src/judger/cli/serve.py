"""`judger serve`: serve a judger config over HTTP (FastAPI on uvicorn)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

TOKEN_ENV = "JUDGER_SERVER_TOKEN"
_SPEC_ENV = "JUDGER_SERVE_SPEC"  # how --workers N hands the spec to each worker process
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of `judger serve`; must stay cheap (no heavy imports here)."""
    parser.add_argument(
        "config",
        nargs="?",
        help="the judger config: path/to/file.py[:NAME] or package.module:NAME "
        "(NAME defaults to 'judger_config', or the only config the file defines)",
    )
    parser.add_argument(
        "--preset", help="serve a preset config class from judger.presets, e.g. GSM8KJudgerConfig"
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        metavar="KEY=VALUE",
        help="set a config field (JSON value or string); repeatable, e.g. --set timeout=10",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)"
    )
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument("--workers", type=int, default=1, help="server processes (default 1)")
    parser.add_argument(
        "--token", help=f"require 'Authorization: Bearer TOKEN' (default: ${TOKEN_ENV} if set)"
    )
    parser.add_argument(
        "--max-body-bytes", type=int, default=8 * 1024 * 1024, help="larger requests get 413 (default 8 MiB)"
    )
    parser.add_argument(
        "--max-concurrency",
        type=int,
        default=512,
        help="judge requests served at once per worker; more get 503 + Retry-After (default 512)",
    )
    parser.add_argument(
        "--graceful-timeout",
        type=float,
        default=30.0,
        help="on shutdown, seconds to let requests in flight finish (default 30)",
    )
    parser.add_argument(
        "--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"]
    )
    parser.add_argument(
        "--access-log", action="store_true", help="log every request (off by default: it costs)"
    )


def _spec(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "config": args.config,
        "preset": args.preset,
        "overrides": args.overrides or [],
        "token": args.token or os.environ.get(TOKEN_ENV) or None,
        "max_body_bytes": args.max_body_bytes,
        "max_concurrency": args.max_concurrency,
    }


def _target(spec: dict[str, Any]) -> Any:
    from judger.cli.loading import load_preset, load_target, parse_overrides

    overrides = parse_overrides(spec["overrides"])
    if spec["preset"]:
        return load_preset(spec["preset"], overrides)
    return load_target(spec["config"], overrides)


def _app(spec: dict[str, Any]) -> Any:
    from judger.server.app import create_app

    return create_app(
        _target(spec),
        token=spec["token"],
        max_body_bytes=spec["max_body_bytes"],
        max_concurrency=spec["max_concurrency"],
    )


def app_from_env() -> Any:
    """The app of one ``--workers N`` process (uvicorn factory)."""
    return _app(json.loads(os.environ[_SPEC_ENV]))


def run(args: argparse.Namespace) -> int:
    if bool(args.config) == bool(args.preset):
        print("judger serve: give a CONFIG or --preset NAME (one of them)", file=sys.stderr)
        return 2
    if args.workers < 1:
        print("judger serve: --workers must be >= 1", file=sys.stderr)
        return 2
    import uvicorn

    spec = _spec(args)
    if args.host not in _LOOPBACK and not spec["token"]:
        print(
            f"judger serve: warning: binding {args.host} without a token; anyone who can reach this "
            f"port can use the judger (set --token or ${TOKEN_ENV})",
            file=sys.stderr,
        )
    try:
        if args.workers == 1:
            app: Any = _app(spec)
            factory = False
        else:
            _target(spec)  # fail here, once, rather than in every worker
            os.environ[_SPEC_ENV] = json.dumps(spec)
            app, factory = "judger.cli.serve:app_from_env", True
    except (ValueError, TypeError, ImportError) as exc:
        print(f"judger serve: {exc}", file=sys.stderr)
        return 2
    uvicorn.run(
        app,
        factory=factory,
        host=args.host,
        port=args.port,
        workers=args.workers if args.workers > 1 else None,
        log_level=args.log_level,
        access_log=args.access_log,
        timeout_graceful_shutdown=args.graceful_timeout,
    )
    return 0
