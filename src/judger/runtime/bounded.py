"""Reading an HTTP reply whose size and duration we bound, whatever the server sends.

A model server is trusted with nothing: a reply is streamed, its bytes on the wire and the bytes
its ``Content-Encoding`` decodes to are both counted against ``max_bytes`` as they arrive (a gzip
bomb stops at the cap, not after inflating), decompression runs in bounded steps that give the
event loop back between them, and the whole request, headers and body, runs under one total
deadline rather than httpx's per-read timeout (a server dripping one byte a second never trips a
per-read timeout). JSON larger than :data:`THREAD_PARSE_BYTES` is parsed in a worker thread, so a
deadline can still fire on the event loop while it is parsed.
"""

from __future__ import annotations

import asyncio
import json
import zlib
from dataclasses import dataclass
from typing import Any

import httpx

from judger.core.deadlines import wait_for
from judger.core.errors import JudgerError

MiB = 2**20
DEFAULT_MAX_REPLY_BYTES = 64 * MiB
ERROR_BODY_BYTES = 64 * 1024  # what is kept of a non-2xx body: enough for its message
THREAD_PARSE_BYTES = MiB
DECODE_STEP = MiB  # decoded bytes produced per decompression call before the loop gets a turn

ACCEPT_ENCODING = "gzip, deflate"  # what we can decode in bounded steps


class ReplyError(JudgerError):
    """A reply refused while it was read or parsed (too large, undecodable, not JSON)."""


class ReplyTooLarge(ReplyError):
    """A reply over its size cap, on the wire or once decoded."""


@dataclass(frozen=True, slots=True)
class BoundedReply:
    """A reply read whole within its caps: status, headers and the decoded body."""

    status_code: int
    headers: httpx.Headers
    content: bytes | bytearray
    truncated: bool = False  # only error bodies are cut (see ERROR_BODY_BYTES), never a 2xx body

    @property
    def ok(self) -> bool:
        """2xx only: a redirect is not followed and not taken for an answer."""
        return 200 <= self.status_code < 300

    def head(self, limit: int = 200) -> str:
        """The first ``limit`` characters of the body, for error messages."""
        return self.content[: limit * 4].decode("utf-8", "replace")[:limit]

    async def json(self) -> Any:
        """The body as JSON; a large one is parsed in a worker thread. Raises ReplyError."""
        if len(self.content) > THREAD_PARSE_BYTES:
            return await asyncio.to_thread(_loads, self.content)
        return _loads(self.content)


def _loads(content: bytes | bytearray) -> Any:
    try:
        return json.loads(content)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ReplyError(f"reply is not valid JSON ({type(exc).__name__}: {str(exc)[:120]})") from None


class _Decoder:
    """One content coding, decoded in steps of at most :data:`DECODE_STEP` bytes."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self._zlib: Any = None
        if encoding == "gzip" or encoding == "x-gzip":
            self._zlib = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._zlib = zlib.decompressobj()
        elif encoding not in ("", "identity"):
            raise ReplyError(f"unsupported Content-Encoding {encoding!r} (we accept {ACCEPT_ENCODING})")
        self._first = True

    @property
    def compressed(self) -> bool:
        return self._zlib is not None

    def steps(self, data: bytes) -> Any:
        """Yield the decoded pieces of ``data``, each at most DECODE_STEP bytes."""
        if self._zlib is None:
            yield data
            return
        while data:
            try:
                piece = self._zlib.decompress(data, DECODE_STEP)
            except zlib.error as exc:
                if self._first and self.encoding == "deflate":
                    # some servers send raw deflate without the zlib header (httpx allows it too)
                    self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
                    self._first = False
                    continue
                raise ReplyError(f"{self.encoding} body does not decode: {exc}") from None
            self._first = False
            yield piece
            if self._zlib.eof:
                return  # trailing bytes after the stream's end are not part of the body
            data = self._zlib.unconsumed_tail

    def finish(self) -> bytes:
        return self._zlib.flush(DECODE_STEP) if self._zlib is not None else b""


async def read_body(
    response: httpx.Response, max_bytes: int, *, truncate: bool = False
) -> tuple[bytes | bytearray, bool]:
    """The decoded body of a streamed ``response``, at most ``max_bytes`` on the wire and decoded.

    Over the cap: ReplyTooLarge, or with ``truncate`` the first ``max_bytes`` and True.
    """
    declared = response.headers.get("content-length")
    if not truncate and declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise ReplyTooLarge(f"reply of {int(declared)} bytes is over the cap of {max_bytes} bytes")
    encodings = [
        e.strip().lower() for e in response.headers.get("content-encoding", "").split(",") if e.strip()
    ]
    if len(encodings) > 1:
        raise ReplyError(f"stacked Content-Encoding {encodings} refused")
    decoder = _Decoder(encodings[0] if encodings else "")
    # one growing buffer, not a list of parts joined at the end: the join would hold the body twice
    body = bytearray()
    wire = 0
    async for chunk in response.aiter_raw():
        wire += len(chunk)
        if wire > max_bytes and not truncate:
            raise ReplyTooLarge(f"reply is over the cap of {max_bytes} bytes on the wire")
        for piece in decoder.steps(chunk):
            body += piece
            if len(body) > max_bytes:
                if truncate:
                    return bytes(body[:max_bytes]), True
                raise ReplyTooLarge(f"reply decodes to over the cap of {max_bytes} bytes")
            if decoder.compressed:
                await asyncio.sleep(0)  # a long run of decompression steps must not starve the loop
        if wire > max_bytes:  # truncating: enough has been read
            return bytes(body[:max_bytes]), True
    body += decoder.finish()
    if len(body) > max_bytes:
        if truncate:
            return bytes(body[:max_bytes]), True
        raise ReplyTooLarge(f"reply decodes to over the cap of {max_bytes} bytes")
    return body, False


async def bounded_request(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    deadline: float,
    max_bytes: int = DEFAULT_MAX_REPLY_BYTES,
    json: Any = None,
    headers: dict[str, str] | None = None,
) -> BoundedReply:
    """Send a request and read its reply within ``deadline`` seconds in all and ``max_bytes``.

    A 2xx body over the cap raises ReplyTooLarge; other bodies are cut to what an error message
    needs. Past the deadline: TimeoutError. Transport errors are httpx's. Redirects are never
    followed (a 3xx comes back as it is, and ``ok`` is False).
    """
    sent_headers = {"accept-encoding": ACCEPT_ENCODING, **(headers or {})}

    async def exchange() -> BoundedReply:
        # httpx's own timeout stays as the per-read bound, no longer than the whole
        request = client.build_request(
            method, url, json=json, headers=sent_headers, timeout=httpx.Timeout(max(deadline, 0.001))
        )
        response = await client.send(request, stream=True, follow_redirects=False)
        try:
            ok = 200 <= response.status_code < 300
            limit = max_bytes if ok else min(max_bytes, ERROR_BODY_BYTES)
            content, truncated = await read_body(response, limit, truncate=not ok)
        finally:
            await response.aclose()
        return BoundedReply(response.status_code, response.headers, content, truncated)

    # one deadline over connect, send, headers and every body read
    try:
        return await wait_for(exchange(), max(deadline, 0.001))
    except TimeoutError:
        raise TimeoutError(f"{method} {url}: no whole reply within {deadline:.3g} s") from None
