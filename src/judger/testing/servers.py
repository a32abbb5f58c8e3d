"""Run an ASGI app under uvicorn on 127.0.0.1 in a background thread, for tests and benchmarks."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LoopbackServer:
    """A uvicorn server bound to 127.0.0.1 only, started and stopped from synchronous code."""

    def __init__(self, app: Any, port: int | None = None, **uvicorn_options: Any) -> None:
        import uvicorn

        self.port = port or free_port()
        options = {"log_level": "warning", "lifespan": "auto", **uvicorn_options}
        self.config = uvicorn.Config(app, host="127.0.0.1", port=self.port, **options)
        self.server = uvicorn.Server(self.config)
        self.thread = threading.Thread(target=self.server.run, name=f"loopback-{self.port}", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0) -> LoopbackServer:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"loopback server on port {self.port} did not start")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)


@contextmanager
def serve_asgi(app: Any, **options: Any) -> Iterator[LoopbackServer]:
    """``with serve_asgi(app) as server: httpx.get(server.url + "/health")``."""
    server = LoopbackServer(app, **options).start()
    try:
        yield server
    finally:
        server.stop()
