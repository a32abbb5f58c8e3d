"""`judger serve`'s connection-level options: the header-read deadline and size, the open-connection
caps and the proxies whose ``X-Forwarded-For`` is believed. Declared here, cheap to import; turned
into ``uvicorn.run`` keyword arguments by :func:`uvicorn_options`."""

from __future__ import annotations

import argparse
import ipaddress
from typing import Any

from judger.server.limits import DEFAULT_MAX_HEADER_BYTES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--header-timeout",
        type=float,
        default=10.0,
        help="seconds a connection has to send a request's headers (from when it opens, and after "
        "each response); slower ones are closed (default 10)",
    )
    parser.add_argument(
        "--max-header-bytes",
        type=int,
        default=DEFAULT_MAX_HEADER_BYTES,
        help="bytes a request's line and headers may take; more get 431 and the connection closed "
        "(default 32 KiB)",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=None,
        help="open connections per worker; past it the one waiting longest for headers is closed, "
        "or the new one gets 503 (default: the open-files limit less max(64, a quarter))",
    )
    parser.add_argument(
        "--max-client-connections",
        type=int,
        default=None,
        help="open connections from one client address; past it the same, with 429 (default: "
        "--max-connections less min(64, a quarter), and no more than keeps the client's unfinished "
        "headers within 1/64 of the memory the server may use)",
    )
    parser.add_argument(
        "--trusted-proxy",
        dest="trusted_proxies",
        action="append",
        metavar="ADDR",
        help="an IP address or network (CIDR) of a proxy in front of the server whose "
        "X-Forwarded-For names the client (repeatable). Default: none; the header is ignored, and "
        "per-client limits count the connecting address",
    )


def _trusted_proxies(values: list[str] | None) -> list[str]:
    proxies = []
    for value in values or []:
        value = value.strip()
        if value == "*":
            raise ValueError(
                "--trusted-proxy: '*' would let any client name its own address and escape the "
                "per-client limits; name the proxies' addresses or networks"
            )
        try:
            proxies.append(str(ipaddress.ip_network(value, strict=False)))
        except ValueError:
            raise ValueError(
                f"--trusted-proxy: {value!r} is not an IP address or network (e.g. 10.0.0.5 or 10.0.0.0/24)"
            ) from None
    return proxies


def uvicorn_options(args: argparse.Namespace) -> dict[str, Any]:
    """``uvicorn.run`` keyword arguments for these options; ValueError names a bad one."""
    from judger.server.connections import (
        ConnectionLimits,
        configure,
        default_max_client_connections,
        default_max_connections,
    )

    if not args.header_timeout > 0:
        raise ValueError(f"--header-timeout must be > 0, got {args.header_timeout}")
    for flag in ("max_connections", "max_client_connections", "max_header_bytes"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise ValueError(f"--{flag.replace('_', '-')} must be >= 1, got {value}")
    proxies = _trusted_proxies(args.trusted_proxies)
    total = args.max_connections or default_max_connections()
    header_bytes = args.max_header_bytes
    per_client = min(
        total, args.max_client_connections or default_max_client_connections(total, header_bytes)
    )
    protocol = configure(ConnectionLimits(args.header_timeout, total, per_client, header_bytes))
    return {
        "http": protocol,
        "h11_max_incomplete_event_size": header_bytes,
        "ws": "none",  # no websocket endpoints: an upgrade would leave the connection limits
        "proxy_headers": bool(proxies),
        "forwarded_allow_ips": proxies or None,
    }
