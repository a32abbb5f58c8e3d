"""Helpers for testing code that talks to judgers over HTTP: real servers on 127.0.0.1."""

from judger.testing.servers import LoopbackServer, serve_asgi

__all__ = ["LoopbackServer", "serve_asgi"]
