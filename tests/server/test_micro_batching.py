"""Concurrent single /reward requests are judged as one batch, and a batch keeps
per-sample isolation: one bad request fails alone."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from judger import RolloutState
from judger.presets import GSM8KJudgerConfig
from judger.presets.inline import InlineScorerJudger
from judger.server.app import create_app
from judger.testing import serve_asgi

pytestmark = pytest.mark.py310


class CountingGSM8K(InlineScorerJudger):
    """The GSM8K preset's own judger, recording the size of every batch it is given."""

    sizes: list[int]

    async def batch_judge(self, rollout_states: list[RolloutState]) -> list[RolloutState]:
        self.sizes.append(len(rollout_states))
        return await super().batch_judge(rollout_states)


def _judger(**options: Any) -> CountingGSM8K:
    built = GSM8KJudgerConfig(**options).build()
    judger = CountingGSM8K(
        built.judger_name,
        built.scorer,
        built.options,
        execution=built.execution,
        on_error=built.on_error,
        timeout=built.timeout,
        batch_scorer=built.batch_scorer,
        response_window=built.response_window,
    )
    judger.sizes = []
    return judger


async def _concurrent(url: str, bodies: list[dict[str, Any]]) -> list[httpx.Response]:
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        return list(await asyncio.gather(*(client.post("/reward", json=b) for b in bodies)))


async def test_concurrent_requests_share_a_batch_and_fail_alone() -> None:
    judger = _judger()
    app = create_app(judger, batch_window=0.05)
    bodies = [{"response": f"#### {i}", "label": str(i if i != 7 else 8)} for i in range(24)]
    bodies[3] = {"response": "#### 3", "label": None}  # no label: this sample fails, alone
    with serve_asgi(app) as srv:
        replies = await _concurrent(srv.url, bodies)
    assert sum(judger.sizes) == 24 and len(judger.sizes) < 24 and max(judger.sizes) > 1
    for i, reply in enumerate(replies):
        if i == 3:
            assert reply.status_code == 422 and "ground truth is None" in reply.json()["detail"]
        else:
            assert reply.status_code == 200 and reply.json()["score"] == (0.0 if i == 7 else 1.0)


async def test_raising_judger_answers_each_request_alone() -> None:
    judger = _judger(on_error="raise")
    app = create_app(judger, batch_window=0.05)
    bodies = [{"response": f"#### {i}", "label": str(i) if i != 5 else None} for i in range(12)]
    with serve_asgi(app) as srv:
        replies = await _concurrent(srv.url, bodies)
    assert [r.status_code for r in replies] == [500 if i == 5 else 200 for i in range(12)]
    assert all(r.json()["score"] == 1.0 for i, r in enumerate(replies) if i != 5)


async def test_generic_judgers_are_not_batched() -> None:
    from judger import JudgerConfig

    calls: list[str] = []

    async def handler(response: str, label: Any, extra_info: dict[str, Any]) -> dict[str, Any]:
        calls.append(response)
        await asyncio.sleep(0.05)
        return {"score": 1.0}

    app = create_app(JudgerConfig(judger_name="h", reward_handler=handler), batch_window=0.05)
    assert app.state.batcher.max_batch == 1  # a NativeJudger batch shares one deadline
    assert create_app(GSM8KJudgerConfig()).state.batcher.max_batch > 1
    with serve_asgi(app) as srv:
        replies = await _concurrent(srv.url, [{"response": str(i), "label": "x"} for i in range(6)])
    assert [r.status_code for r in replies] == [200] * 6 and sorted(calls) == [str(i) for i in range(6)]


class SlowGSM8K(CountingGSM8K):
    async def batch_judge(self, rollout_states: list[RolloutState]) -> list[RolloutState]:
        await asyncio.sleep(0.2)
        return await super().batch_judge(rollout_states)


async def test_a_cancelled_request_does_not_fail_its_batch() -> None:
    """A client that goes away cancels its own request, not the requests batched with it."""
    from judger.server.batching import MicroBatcher

    base = _judger()
    judger = SlowGSM8K(
        base.judger_name,
        base.scorer,
        base.options,
        execution=base.execution,
        on_error=base.on_error,
        timeout=base.timeout,
        batch_scorer=base.batch_scorer,
        response_window=base.response_window,
    )
    judger.sizes = []
    batcher = MicroBatcher(judger)
    states = [RolloutState(response=f"#### {i}", reward_model={"ground_truth": str(i)}) for i in range(4)]
    tasks = [asyncio.ensure_future(batcher.judge(s)) for s in states]
    await asyncio.sleep(0.05)  # the batch is being judged
    tasks[0].cancel()
    done = await asyncio.gather(*tasks[1:], return_exceptions=True)
    assert all(isinstance(s, RolloutState) and s.reward and s.reward["score"] == 1.0 for s in done), done
    assert judger.sizes == [4]  # one batch, judged to its end
