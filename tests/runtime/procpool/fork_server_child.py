"""Run by ``test_fork_server_adoption.py``: this process starts a fork server of its own, then a
child of it (forked, or started by multiprocessing's fork server) runs a ProcessPool call, adopting
that server or not. Prints where the pool's worker came from, as JSON."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import sys
from typing import Any

from judger.runtime.procpool.forkserver import (
    adopt_fork_server,
    fork_server_handle,
    start_fork_server,
    stop_fork_server,
)


def child(handle: dict[str, Any] | None, conn: Any) -> None:
    import pool_probe

    from judger.runtime.procpool.pool import ProcessPool

    adopted = adopt_fork_server(handle) if handle is not None else False
    with ProcessPool(1, timeout=60) as pool:
        conn.send((adopted, pool.run_sync(pool_probe.where)))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def main(kind: str, adopt: bool) -> None:
    server = start_fork_server(["pool_probe"])
    pid, address = server._forkserver_pid, server._forkserver_address
    try:
        ctx = mp.get_context(kind)
        handle = fork_server_handle(server, forked=kind == "fork") if adopt else None
        receiving, sending = ctx.Pipe(duplex=False)
        process = ctx.Process(target=child, args=(handle, sending))
        process.start()
        adopted, (imported_in, worker_parent) = receiving.recv()
        process.join(60)
    finally:
        stop_fork_server(server)
    report = {
        "adopted": adopted,
        "server": pid,
        "imported_in": imported_in,
        "worker_parent": worker_parent,
        "exitcode": process.exitcode,
        "server_alive": _alive(pid),
        "socket_left": os.path.exists(address),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] == "adopt")
