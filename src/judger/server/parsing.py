"""Request bodies parsed where they stall no one: small ones inline, large ones on a thread, those
whose parse could hold the interpreter long (:func:`~judger.server.body.costly`) in a process."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from judger.core.errors import JudgeTimeoutError
from judger.runtime.procpool import ProcessPool
from judger.server.body import BodyError, BodyLimits, costly, parse_json

# bodies above this size are parsed and validated on a thread, so the event loop keeps serving
INLINE_PARSE_BYTES = 64 * 1024
PARSER_WORKERS = 2
# json.loads of a body within max_body_bytes takes well under a second; past this its parse is refused
PARSE_TIMEOUT = 30.0

T = TypeVar("T")


class BodyParser:
    """``await parser.parse(body, build)``: ``build`` of the body's JSON value, within ``limits``.
    The process pool for costly bodies starts on first need; :meth:`aclose` stops it."""

    def __init__(self, limits: BodyLimits, max_body_bytes: int) -> None:
        self.limits = limits
        self.max_body_bytes = max_body_bytes
        self._pool: ProcessPool | None = None

    async def parse(self, body: bytes, build: Callable[[Any], T]) -> T:
        limits = self.limits
        if len(body) <= INLINE_PARSE_BYTES:
            return build(parse_json(body, limits))
        if costly(body):
            # parsed where holding the interpreter stalls no one; a body over a limit is refused
            # there and only the error comes back
            try:
                value = await self._processes().run(parse_json, body, limits)
            except JudgeTimeoutError:
                raise BodyError(f"body: not parsed within {PARSE_TIMEOUT:g} s") from None
            return await asyncio.to_thread(build, value)
        return await asyncio.to_thread(lambda: build(parse_json(body, limits)))

    def _processes(self) -> ProcessPool:
        if self._pool is None:
            # judger's own ProcessPool, not concurrent.futures: a lost worker (OOM killer) is
            # replaced, where a ProcessPoolExecutor breaks for every later body; and a pool of its
            # own, not shared_pool, so no body waits behind the judger's scoring calls there
            self._pool = ProcessPool(
                PARSER_WORKERS,
                timeout=PARSE_TIMEOUT,
                max_input_bytes=self.max_body_bytes + 64 * 1024,
                name="body_parser",
                # spawn: this pool must not be the one that starts multiprocessing's fork server,
                # whose preload (math_verify) the judger's shared pool sets
                start_method="spawn",
            )
        return self._pool

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.aclose()
