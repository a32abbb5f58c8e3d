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


async def _cancel_turned_into(error: Exception, seconds: float) -> None:
    """A body whose code turns the cancel that reaches it into ``error``, as anyio's task group does
    on Python 3.10 when the cancel lands while httpx connects."""
    try:
        await asyncio.sleep(5)
    except asyncio.CancelledError:
        raise error from None
    await asyncio.sleep(seconds)


async def test_a_cancel_the_body_turned_into_another_error_is_still_the_judge_deadline() -> None:
    from judger.core.deadlines import judge_deadline
    from judger.core.errors import JudgeTimeoutError

    anyio_310 = ValueError("second argument (exceptions) must be a non-empty sequence")
    with pytest.raises(JudgeTimeoutError, match="did not finish within 0.05 s") as raised:
        async with judge_deadline("remote_reward", 0.05):
            await _cancel_turned_into(anyio_310, 0)
    assert raised.value.__cause__ is anyio_310  # what the body raised stays on the chain

    # before the deadline fires, the body's own errors (its own TimeoutError too) are its own
    for own in (ValueError("bad reply"), TimeoutError("the request's own timeout")):
        with pytest.raises(type(own)) as kept:
            async with judge_deadline("remote_reward", 5):
                raise own
        assert kept.value is own
