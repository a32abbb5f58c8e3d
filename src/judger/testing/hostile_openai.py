"""A hostile OpenAI-compatible server on 127.0.0.1, one attack per mode, for tests.

``HostileServer(mode)`` speaks raw HTTP/1.1 over ``asyncio.start_server`` in a background thread,
so it can send what no well-behaved framework would: a gzip bomb, a body that never ends, one
that drips a byte at a time. Every reply closes its connection. ``GET /v1/models`` lists
``model``; ``POST /v1/chat/completions`` (and ``/v1/completions``, in its own layout) answers ``n`` choices
of ``content`` with ``token_ids``, ``prompt_token_ids`` and logprobs (as vLLM does when asked),
then the mode spoils it:

``ok``               a well-formed reply
``gzip_bomb``        ``Content-Encoding: gzip``; the JSON decodes to about ``bomb_bytes``
``endless``          a chunked body of JSON whitespace that never ends
``drip_models``      ``/v1/models`` sends its headers, then one byte every ``drip_interval`` s
``drip_chat``        the same for the chat endpoint
``huge``             a well-formed reply whose text is ``huge_bytes`` of padding, then ``content``
``bad_ids``          ``token_ids`` holds ``bad_value`` in the middle
``bad_prompt_ids``   ``prompt_token_ids`` holds ``bad_value`` in the middle
``bad_logprobs``     one logprob is ``bad_value`` (NaN and infinities go out as JSON's NaN)
``finish_reason``    every choice ends with ``finish_reason`` (None: null)
``content_list``     ``message.content`` is a list of text parts
``redirect``         a 302 to another path, with a well-formed reply as its body
``dup_index``        every choice has index 0

``content`` may hold anything JSON can carry (a lone surrogate goes out as ``"\\ud800"``).
:class:`PeakRSS` measures this process's resident memory over a block, for the memory bounds.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import zlib
from typing import Any

MiB = 2**20
MODES = (
    "ok",
    "gzip_bomb",
    "endless",
    "drip_models",
    "drip_chat",
    "huge",
    "bad_ids",
    "bad_prompt_ids",
    "bad_logprobs",
    "finish_reason",
    "content_list",
    "redirect",
    "dup_index",
)
_REASONS = {200: "OK", 302: "Found", 404: "Not Found"}


def gzip_bomb(body_prefix: bytes, filler: int, body_suffix: bytes) -> bytes:
    """A gzip stream of ``prefix + b" " * filler + suffix``, compressed about 1000:1."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [packer.compress(body_prefix)]
    block = b" " * MiB
    for _ in range(filler // MiB):
        parts.append(packer.compress(block))
    parts.append(packer.compress(b" " * (filler % MiB) + body_suffix))
    parts.append(packer.flush())
    return b"".join(parts)


class HostileServer:
    """See the module docstring. Attributes may be changed while it runs."""

    def __init__(
        self,
        mode: str = "ok",
        *,
        model: str = "policy",
        content: str = "The answer is \\boxed{42}",
        bomb_bytes: int = 64 * MiB,
        huge_bytes: int = 8 * MiB,
        bad_value: Any = -7,
        finish_reason: str | None = "stop",
        drip_interval: float = 0.5,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")
        self.mode = mode
        self.model = model
        self.content = content
        self.bomb_bytes = bomb_bytes
        self.huge_bytes = huge_bytes
        self.bad_value = bad_value
        self.finish_reason = finish_reason
        self.drip_interval = drip_interval
        self.requests: dict[str, int] = {}
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._thread: threading.Thread | None = None
        self._bombs: dict[tuple[int, int], bytes] = {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self, timeout: float = 10.0) -> HostileServer:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._server = loop.run_until_complete(asyncio.start_server(self._accept, "127.0.0.1", 0))
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="hostile-openai", daemon=True)
        self._thread.start()
        if not ready.wait(timeout):
            raise RuntimeError("hostile server did not start")
        return self

    def stop(self, timeout: float = 10.0) -> None:
        loop = self._loop
        if loop is None or self._thread is None:
            return

        async def shutdown() -> None:
            assert self._server is not None
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            loop.stop()

        asyncio.run_coroutine_threadsafe(shutdown(), loop)
        self._thread.join(timeout)
        self._loop = None

    def __enter__(self) -> HostileServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- HTTP ------------------------------------------------------------------------------------

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {
                k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)
            }
            length = int(headers.get("content-length", "0") or 0)
            body = json.loads(await reader.readexactly(length)) if length else {}
            self.requests[path] = self.requests.get(path, 0) + 1
            await self._answer(method, path, body, writer)
        except (asyncio.CancelledError, ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _send(
        self, writer: asyncio.StreamWriter, status: int, body: bytes, headers: dict[str, str] | None = None
    ) -> None:
        fields = {"content-type": "application/json", "content-length": str(len(body)), **(headers or {})}
        head = f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in fields.items()) + "connection: close\r\n\r\n"
        writer.write(head.encode("latin-1"))
        writer.write(body)
        await writer.drain()

    async def _drip(self, writer: asyncio.StreamWriter) -> None:
        head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n"
        writer.write(head.encode("latin-1"))
        while True:
            writer.write(b" ")
            await writer.drain()
            await asyncio.sleep(self.drip_interval)

    async def _endless(self, writer: asyncio.StreamWriter) -> None:
        head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
        writer.write(head.encode("latin-1"))
        chunk = b" " * (64 * 1024)
        framed = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
        writer.write(b"1\r\n{\r\n")
        while True:
            writer.write(framed)
            await writer.drain()

    async def _answer(
        self, method: str, path: str, body: dict[str, Any], writer: asyncio.StreamWriter
    ) -> None:
        if method == "GET" and path == "/v1/models":
            if self.mode == "drip_models":
                await self._drip(writer)
            data = {"object": "list", "data": [{"id": self.model, "object": "model"}]}
            await self._send(writer, 200, json.dumps(data).encode())
            return
        if method != "POST" or path not in ("/v1/chat/completions", "/v1/completions", "/elsewhere"):
            await self._send(writer, 404, b'{"error": {"message": "not found"}}')
            return
        mode = self.mode
        if mode == "drip_chat":
            await self._drip(writer)
        if mode == "endless":
            await self._endless(writer)
        reply = self.chat_reply(body, completions=path == "/v1/completions")
        if mode == "gzip_bomb":
            n = body.get("n")
            packed = self.bomb(n if isinstance(n, int) else 1)
            await self._send(writer, 200, packed, {"content-encoding": "gzip"})
            return
        encoded = json.dumps(reply).encode()
        if mode == "redirect":
            await self._send(writer, 302, encoded, {"location": f"{self.url}/elsewhere"})
            return
        await self._send(writer, 200, encoded)

    def bomb(self, n: int = 1) -> bytes:
        """The gzip bomb answering a chat request for ``n`` choices (made once per size and ``n``):
        whitespace inside the JSON object, so that it decodes to a valid reply."""
        key = (self.bomb_bytes, n)
        if key not in self._bombs:
            text = json.dumps(self.chat_reply({"n": n})).encode()
            cut = text.index(b'"choices"')
            self._bombs[key] = gzip_bomb(text[:cut], self.bomb_bytes, text[cut:])
        return self._bombs[key]

    def chat_reply(self, body: dict[str, Any], completions: bool = False) -> dict[str, Any]:
        """The reply to a chat (or with ``completions``, a completions) request, spoiled as ``mode``
        says (not the transport attacks)."""
        asked = body.get("n")
        n = asked if isinstance(asked, int) and asked >= 1 else 1
        mode = self.mode
        text = "x" * self.huge_bytes + "\n" + self.content if mode == "huge" else self.content
        ids = [ord(c) % 50000 for c in text[:4096]] if mode != "huge" else [120] * 16
        choices = []
        for j in range(n):
            token_ids = list(ids)
            logprobs = [-0.01] * len(token_ids)
            if mode == "bad_ids" and token_ids:
                token_ids[len(token_ids) // 2] = self.bad_value
            if mode == "bad_logprobs" and logprobs:
                logprobs[len(logprobs) // 2] = self.bad_value
            entries = [
                {"token": f"token_id:{t}", "logprob": lp, "top_logprobs": []}
                for t, lp in zip(token_ids, logprobs)
            ]
            content: Any = [{"type": "text", "text": text}] if mode == "content_list" else text
            choice: dict[str, Any] = {
                "index": 0 if mode == "dup_index" else j,
                "finish_reason": self.finish_reason if mode == "finish_reason" else "stop",
                "token_ids": token_ids,
            }
            if completions:
                choice["text"] = content
                choice["logprobs"] = {
                    "tokens": [f"token_id:{t}" for t in token_ids],
                    "token_logprobs": logprobs,
                }
            else:
                choice["message"] = {"role": "assistant", "content": content}
                choice["logprobs"] = {"content": entries}
            choices.append(choice)
        prompt_ids: list[Any] = [11, 12, 13, 14]
        if mode == "bad_prompt_ids":
            prompt_ids[2] = self.bad_value
        return {
            "id": "chatcmpl-hostile",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": choices,
            "prompt_token_ids": prompt_ids,
            "usage": {
                "prompt_tokens": 4,
                "completion_tokens": len(ids) * n,
                "total_tokens": 4 + len(ids) * n,
            },
        }


def _rss_bytes() -> int:
    with open("/proc/self/statm", encoding="ascii") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakRSS:
    """``with PeakRSS() as rss: ...``; then ``rss.growth``: the peak resident memory of this process
    during the block above what it was at the start, sampled every ``every`` seconds."""

    def __init__(self, every: float = 0.005) -> None:
        self.every = every
        self.baseline = 0
        self.peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def growth(self) -> int:
        return max(0, self.peak - self.baseline)

    def _watch(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _rss_bytes())
            time.sleep(self.every)

    def __enter__(self) -> PeakRSS:
        self.baseline = self.peak = _rss_bytes()
        self._thread = threading.Thread(target=self._watch, name="peak-rss", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join()
        self.peak = max(self.peak, _rss_bytes())


__all__ = ["MODES", "HostileServer", "PeakRSS", "gzip_bomb"]
