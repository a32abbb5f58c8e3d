"""core.batching: dedup written once, and micro-batching of concurrent single calls."""

from __future__ import annotations

import asyncio

import pytest

from judger.core.batching import MicroBatcher, dedup

pytestmark = pytest.mark.py310


def test_dedup_keeps_first_of_each_key_and_maps_every_item() -> None:
    items = ["a", "b", "a", "c", "b", "x"]
    unique, slots = dedup(items, lambda s: None if s == "x" else s)
    assert unique == ["a", "b", "c", "x"]
    assert slots is not None and [unique[s] for s in slots] == items
    assert dedup(["a", "b"], lambda s: s) == (["a", "b"], None)
    # a None key never merges, even with another None
    assert dedup(["x", "x"], lambda s: None) == (["x", "x"], None)


async def test_calls_of_one_event_loop_turn_travel_as_one_batch() -> None:
    seen: list[list[int]] = []

    async def run(items: list[int]) -> list[int]:
        seen.append(items)
        return [i * 10 for i in items]

    batcher: MicroBatcher[int, int] = MicroBatcher(run)
    out = await asyncio.gather(*(batcher.submit(i) for i in range(500)))
    assert out == [i * 10 for i in range(500)]
    assert seen == [list(range(500))]
    # a later call is its own batch
    assert await batcher.submit(7) == 70 and len(seen) == 2


async def test_a_window_groups_calls_that_arrive_apart() -> None:
    seen: list[list[int]] = []

    async def run(items: list[int]) -> list[int]:
        seen.append(items)
        return items

    batcher: MicroBatcher[int, int] = MicroBatcher(run, window_s=0.2)

    async def late(i: int) -> int:
        await asyncio.sleep(0.01 * i)
        return await batcher.submit(i)

    assert await asyncio.gather(*(late(i) for i in range(5))) == list(range(5))
    assert seen == [list(range(5))]


async def test_max_batch_splits_and_a_failing_batch_fails_its_callers_only() -> None:
    seen: list[list[int]] = []

    async def run(items: list[int]) -> list[int]:
        seen.append(items)
        if 3 in items:
            raise ValueError("boom")
        return items

    batcher: MicroBatcher[int, int] = MicroBatcher(run, max_batch=3)
    out = await asyncio.gather(*(batcher.submit(i) for i in range(6)), return_exceptions=True)
    assert seen == [[0, 1, 2], [3, 4, 5]]
    assert out[:3] == [0, 1, 2]
    assert all(isinstance(o, ValueError) for o in out[3:])


def test_bad_arguments_are_refused() -> None:
    async def run(items: list[int]) -> list[int]:
        return items

    with pytest.raises(ValueError, match="window_s"):
        MicroBatcher(run, window_s=-1)
