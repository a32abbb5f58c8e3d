"""judger.runtime.bounded against a hostile server on 127.0.0.1: caps on the wire and decoded, one
total deadline, the event loop kept free, redirects never followed; and HttpClient on top of it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from judger.core.errors import HandlerHTTPError, HandlerHTTPTimeout
from judger.runtime.bounded import ReplyError, ReplyTooLarge, bounded_request
from judger.runtime.http import HttpClient
from judger.testing.hostile_openai import HostileServer, PeakRSS

# the whole exchange's deadline is judger.core.deadlines.wait_for, which differs on Python 3.10
pytestmark = pytest.mark.py310

MiB = 2**20
CHAT = "/v1/chat/completions"
# a hang guard's bound: GUARD times the time a call normally takes (its deadline, and a little), so
# a busy machine never trips it while a hang still does; the error says which deadline ended it
GUARD = 5


@pytest.fixture
def hostile() -> Iterator[HostileServer]:
    server = HostileServer(drip_interval=0.1).start()
    yield server
    server.stop()


async def post(server: HostileServer, max_bytes: int = MiB, deadline: float = 5.0) -> Any:
    async with httpx.AsyncClient() as client:
        return await bounded_request(
            client, "POST", server.url + CHAT, json={"n": 1}, deadline=deadline, max_bytes=max_bytes
        )


async def test_a_well_formed_reply_reads_whole(hostile: HostileServer) -> None:
    reply = await post(hostile)
    assert reply.ok and (await reply.json())["choices"][0]["message"]["content"] == hostile.content


async def test_a_gzip_bomb_stops_at_the_decoded_cap_with_the_loop_free(hostile: HostileServer) -> None:
    hostile.mode = "gzip_bomb"
    hostile.bomb_bytes = 256 * MiB  # about 250 KB on the wire
    hostile.bomb()  # compressed now (seconds on a busy machine), not inside the reply's deadline
    gaps: list[float] = []

    async def ticker() -> None:
        # the loop thread's own CPU time between ticks: what one step of decoding holds the loop
        # for, which a busy machine's scheduling (a wall-clock gap) does not change
        last = time.thread_time()
        while True:
            await asyncio.sleep(0.005)
            now = time.thread_time()
            gaps.append(now - last)
            last = now

    tick = asyncio.ensure_future(ticker())
    try:
        with PeakRSS() as rss:
            with pytest.raises(ReplyTooLarge, match="decodes to over the cap of 8388608 bytes"):
                await post(hostile, max_bytes=8 * MiB, deadline=GUARD * 6)
            # a decoded cap above what the wire carries: the wire cap alone would not stop it
            with pytest.raises(ReplyTooLarge, match="decodes to over the cap"):
                await post(hostile, max_bytes=64 * MiB, deadline=GUARD * 6)
    finally:
        tick.cancel()
    assert rss.growth < 200 * MiB
    assert max(gaps) < 0.5, max(
        gaps
    )  # decompression runs in steps: the event loop (and its deadlines) keep running


async def test_an_endless_body_stops_at_the_wire_cap(hostile: HostileServer) -> None:
    hostile.mode = "endless"
    start = time.monotonic()
    with pytest.raises(ReplyTooLarge, match="on the wire"):
        await post(hostile, max_bytes=2 * MiB)
    assert time.monotonic() - start < 2.0


async def test_a_declared_length_over_the_cap_is_refused_before_reading(hostile: HostileServer) -> None:
    hostile.mode = "huge"
    with pytest.raises(ReplyTooLarge, match="reply of 83[0-9]{5} bytes is over the cap of 1048576"):
        await post(hostile, max_bytes=MiB)


async def test_one_deadline_over_the_whole_reply(hostile: HostileServer) -> None:
    hostile.mode = "drip_chat"  # a byte every 0.1 s: a per-read timeout would never fire
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="no whole reply within 0.5 s"):
        await post(hostile, deadline=0.5)
    assert time.monotonic() - start < GUARD * 0.7  # normally: the 0.5 s deadline and a little


async def test_a_redirect_is_not_followed(hostile: HostileServer) -> None:
    hostile.mode = "redirect"
    reply = await post(hostile)
    assert reply.status_code == 302 and not reply.ok
    assert hostile.requests.get("/elsewhere", 0) == 0


async def test_unsupported_or_stacked_encodings_are_refused() -> None:
    def app(encoding: str) -> httpx.MockTransport:
        return httpx.MockTransport(
            lambda request: httpx.Response(200, headers={"content-encoding": encoding})
        )

    for encoding, message in (("br", "unsupported Content-Encoding 'br'"), ("gzip, gzip", "stacked")):
        async with httpx.AsyncClient(transport=app(encoding)) as client:
            with pytest.raises(ReplyError, match=message):
                await bounded_request(client, "GET", "http://127.0.0.1:9/x", deadline=1.0)


async def test_http_client_refuses_bombs_redirects_and_drips(hostile: HostileServer) -> None:
    # the cap must end the bomb, not the deadline: a deadline of many times the bomb's normal time
    # (a 1 s deadline ended it first on a busy machine: "timeout after 1 s", not "over the cap")
    http = HttpClient(timeout=30.0, max_retries=0, max_reply_bytes=MiB)
    try:
        hostile.mode = "gzip_bomb"
        with pytest.raises(HandlerHTTPError, match="over the cap"):
            await http.post_json(hostile.url + CHAT, {})
        hostile.mode = "redirect"
        with pytest.raises(HandlerHTTPError, match="HTTP 302.*not retried"):
            await http.post_json(hostile.url + CHAT, {})
    finally:
        await http.aclose()
    http = HttpClient(timeout=1.0, max_retries=0, max_reply_bytes=MiB)
    try:
        hostile.mode = "drip_chat"
        start = time.monotonic()
        with pytest.raises(HandlerHTTPTimeout, match="timeout after 1 s"):
            await http.post_json(hostile.url + CHAT, {})
        assert time.monotonic() - start < GUARD * 1.2  # normally: the 1 s deadline and a little
    finally:
        await http.aclose()
