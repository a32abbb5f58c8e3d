"""How much of the machine one client of ``judger serve`` may hold: the defaults of its per-client caps.

A client holds memory two ways: unfinished request headers on each of its connections (at most
``max_header_bytes`` each, plus the connection's own cost, about 7.5 KiB of the server's resident
memory each as measured, counted as :data:`CONNECTION_OVERHEAD`), and the bodies of its judging
requests while they are read and judged. By default its connections may hold at most
1/:data:`CLIENT_HEADER_SHARE` of the memory the server may use, and its bodies
1/:data:`CLIENT_BODY_SHARE`: together well under a tenth, whatever the client does.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_MAX_HEADER_BYTES = 32 * 1024
"""A request's line and headers, as nginx allows by default (four 8 KiB buffers)."""
CONNECTION_OVERHEAD = 16 * 1024
CLIENT_HEADER_SHARE = 64
CLIENT_BODY_SHARE = 16
_CGROUP_MEMORY_MAX = Path("/sys/fs/cgroup/memory.max")


def memory_bytes() -> int:
    """The memory this process may use: its cgroup's limit where one is set, else the machine's."""
    try:
        limit = _CGROUP_MEMORY_MAX.read_text().strip()
    except OSError:
        limit = "max"
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return min(int(limit), physical) if limit.isdigit() else physical


def client_connections_for_memory(max_header_bytes: int, memory: int | None = None) -> int:
    """The most connections whose unfinished headers stay within a client's share of memory."""
    share = (memory if memory is not None else memory_bytes()) // CLIENT_HEADER_SHARE
    return max(1, share // (max_header_bytes + CONNECTION_OVERHEAD))


def default_client_body_bytes(max_body_bytes: int, memory: int | None = None) -> int:
    """The bytes of request bodies one client may have in flight: its share of memory (never less
    than one body of the largest size allowed)."""
    share = (memory if memory is not None else memory_bytes()) // CLIENT_BODY_SHARE
    return max(max_body_bytes, share)
