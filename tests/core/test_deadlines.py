"""``judger.core.deadlines.wait_for``: a timeout that never drops its caller's cancellation."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from judger.core.deadlines import wait_for

pytestmark = pytest.mark.py310

Waiter = Callable[[Awaitable[Any], float], Awaitable[Any]]


async def _cancel_as_the_line_arrives(waiter: Waiter) -> str:
    """Cancel a task reading a line in the same turn of the loop as the line arrives: the
    moment a sandbox's report lands as the trainer gives up on the sample."""
    reader = asyncio.StreamReader()
    after: list[str] = []

    async def read() -> bytes:
        line = await waiter(reader.readline(), 5)
        after.append("went on")  # a sample that was told to stop reading its next report
        return line

    task = asyncio.create_task(read())
    for _ in range(3):  # the task, and asyncio.wait_for's inner task, wait on the reader
        await asyncio.sleep(0)
    reader.feed_data(b"report\n")
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        return "cancelled" + (" after going on" if after else "")
    return "finished"


async def test_a_cancel_that_meets_the_result_is_not_lost() -> None:
    assert await _cancel_as_the_line_arrives(wait_for) == "cancelled"


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="asyncio.wait_for keeps the cancel from 3.12")
async def test_asyncio_wait_for_loses_that_cancel_here() -> None:
    # the control: the race above is real on this Python, so the test above can fail
    assert await _cancel_as_the_line_arrives(asyncio.wait_for) == "finished"


async def test_the_result_in_time_and_a_timeout_past_it() -> None:
    assert await wait_for(asyncio.sleep(0.01, result="done"), 5) == "done"
    assert await wait_for(asyncio.sleep(0.01, result="no limit"), None) == "no limit"
    with pytest.raises(TimeoutError):  # the builtin one on every Python judger supports
        await wait_for(asyncio.sleep(5), 0.05)


async def test_a_timeout_cancels_the_awaited_future() -> None:
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    with pytest.raises(TimeoutError):
        await wait_for(future, 0.05)
    assert future.cancelled()  # a Ray reference's wrapped future is cancelled with it
