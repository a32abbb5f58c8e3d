"""SingleTurnAgentLoop and run_judger: single and batch judging, pause/abort, endpoint generation."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from judger import (
    JudgerConfig,
    RolloutState,
    Status,
)
from judger.core.judger import Judger
from judger.trainer import SingleTurnAgentLoop, SingleTurnAgentLoopConfig, prepare_train_data, run_judger
from judger.trainer.agent_loop import render_messages


def prompt(gt: str = "4", gid: str = "g0") -> RolloutState:
    return RolloutState(
        message=[{"role": "user", "content": f"2 + 2 = ? ({gt})"}],
        prompt_ids=[1, 2, 3],
        reward_model={"ground_truth": gt},
        data_source="toy",
        group_id=gid,
    )


def em_judger(**kw: Any) -> Judger:
    return JudgerConfig(judger_name="em", reward_handler="judger.testing.handlers:exact_match", **kw).build()


class Recorder(Judger):
    """Counts judge / batch_judge calls; optionally slow."""

    def __init__(self, delay: float = 0.0) -> None:
        super().__init__("recorder")
        self.delay = delay
        self.judged: list[str | None] = []
        self.batches = 0

    async def judge_payload(self, payload: Any) -> Any:
        await asyncio.sleep(self.delay)
        if isinstance(payload, list):
            self.batches += 1
            self.judged += [p["response"] for p in payload]
            return [{"score": 1.0} for _ in payload]
        self.judged.append(payload["response"])
        return {"score": 1.0}


def scripted(answers: list[tuple[str, str]]):
    """A fake generate function: the i-th call answers answers[i] = (text, finish_reason)."""
    calls = iter(answers)

    async def generate(state: RolloutState) -> dict[str, Any]:
        text, finish = next(calls)
        await asyncio.sleep(0)
        return {"response": text, "response_ids": [ord(c) for c in text], "finish_reason": finish}

    return generate


async def test_group_generated_and_judged_then_trainable() -> None:
    config = SingleTurnAgentLoopConfig(group_size=4)
    loop = SingleTurnAgentLoop(
        config, scripted([("4", "stop"), ("5", "stop"), ("4", "length"), ("4", "stop")]), em_judger()
    )
    states = await loop.generate_group(prompt())
    assert [s.response for s in states] == ["4", "5", "4", "4"]
    assert all(s.status == Status.COMPLETED and s.group_id == "g0" for s in states)
    assert [s.reward["score"] for s in states] == [1.0, 0.0, 1.0, 1.0]
    data = prepare_train_data([states])
    assert len(data.samples) == 4 and data.samples[1].advantage < 0 < data.samples[0].advantage


async def test_single_mode_judges_only_completed() -> None:
    judger = Recorder()
    gen = scripted([("a", "stop"), ("b", "abort"), ("c", "weird"), ("d", "stop")])
    loop = SingleTurnAgentLoop(SingleTurnAgentLoopConfig(group_size=4), gen, judger)
    states = await loop.generate_group(prompt())
    assert [s.status for s in states] == [Status.COMPLETED, Status.ABORTED, Status.FAILED, Status.COMPLETED]
    assert sorted(judger.judged) == ["a", "d"] and judger.batches == 0
    assert states[1].reward is None and states[2].reward is None


async def test_batch_mode_judges_whole_group_once_or_not_at_all() -> None:
    config = SingleTurnAgentLoopConfig(group_size=3, enable_batch_judge=True)
    judger = Recorder()
    loop = SingleTurnAgentLoop(config, scripted([("a", "stop"), ("b", "stop"), ("c", "stop")]), judger)
    states = await loop.generate_group(prompt())
    assert judger.batches == 1 and judger.judged == ["a", "b", "c"]
    assert all(s.reward == {"score": 1.0} for s in states)

    judger = Recorder()
    loop = SingleTurnAgentLoop(config, scripted([("a", "stop"), ("b", "abort"), ("c", "stop")]), judger)
    states = await loop.generate_group(prompt())
    assert judger.batches == 0 and judger.judged == []
    assert all(s.reward is None for s in states)


async def test_generate_failure_marks_the_sample_failed() -> None:
    async def broken(state: RolloutState) -> None:
        raise ConnectionError("engine down")

    loop = SingleTurnAgentLoop(SingleTurnAgentLoopConfig(group_size=2), broken, Recorder())
    states = await loop.generate_group(prompt())
    assert all(s.status == Status.FAILED and s.error_msg == "ConnectionError: engine down" for s in states)


async def test_pause_while_judging_aborts_after_the_grace() -> None:
    for batch in (False, True):
        judger = Recorder(delay=5.0)
        states = [prompt().model_copy(update={"status": Status.COMPLETED, "response": "x"}) for _ in range(2)]
        pause = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, pause.set)
        start = loop.time()
        await run_judger(judger, states, enable_batch_judge=batch, pause=pause, pause_grace_s=0.2)
        elapsed = loop.time() - start
        assert 0.2 <= elapsed < 3.0
        assert all(
            s.status == Status.ABORTED and s.finish_reason == "abort" and s.reward is None for s in states
        )


async def test_pause_grace_lets_fast_work_finish() -> None:
    judger = Recorder(delay=0.1)
    states = [prompt().model_copy(update={"status": Status.COMPLETED, "response": "x"})]
    pause = asyncio.Event()
    pause.set()
    await run_judger(judger, states, pause=pause, pause_grace_s=2.0)
    assert states[0].status == Status.COMPLETED and states[0].reward == {"score": 1.0}


async def test_pause_during_generation_aborts_in_flight_samples() -> None:
    async def slow(state: RolloutState) -> dict[str, Any]:
        await asyncio.sleep(5)
        return {"response": "late", "finish_reason": "stop"}

    judger = Recorder()
    agent = SingleTurnAgentLoop(SingleTurnAgentLoopConfig(group_size=2, pause_grace_s=0.1), slow, judger)
    asyncio.get_running_loop().call_later(0.05, agent.pause)
    states = await agent.generate_group(prompt())
    assert all(s.status == Status.ABORTED and s.finish_reason == "abort" for s in states)
    assert judger.judged == []
    assert prepare_train_data([states]).skipped == {"aborted": 1}


async def test_cancel_marks_samples_aborted() -> None:
    judger = Recorder(delay=5.0)
    states = [prompt().model_copy(update={"status": Status.COMPLETED, "response": "x"})]
    task = asyncio.ensure_future(run_judger(judger, states))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert states[0].status == Status.ABORTED and states[0].finish_reason == "abort"


def test_openai_compatible_endpoint() -> None:
    from judger.testing import fake_openai, serve_asgi

    fake = fake_openai.FakeOpenAI(model="fake-policy")
    with serve_asgi(fake.app) as server:
        config = SingleTurnAgentLoopConfig(group_size=3, sample_params={"max_tokens": 64, "temperature": 1.0})

        async def main() -> list[RolloutState]:
            agent = SingleTurnAgentLoop(
                config,
                server.url,
                em_judger(),
                tokenize=lambda text: [ord(c) for c in text],
                render_prompt=render_messages,
            )
            try:
                return await agent.generate_group(prompt(gt="The answer is \\boxed{4}"))
            finally:
                await agent.aclose()

        states = asyncio.run(main())
    # the fake answers with the last integer of the prompt; the model name came from /v1/models
    assert fake.models_requests == 1 and fake.completion_requests == 3
    body = fake.requests[-1]
    assert body["model"] == "fake-policy" and body["max_tokens"] == 64 and body["logprobs"] == 1
    for s in states:
        assert s.response == "The answer is \\boxed{4}"
        assert s.response_ids == [ord(c) for c in s.response]
        assert s.logprobs == [-0.01] * len(s.response)
        assert s.status == Status.COMPLETED and s.reward["score"] == 1.0
        assert s.prompt_ids == [1, 2, 3]  # given prompt ids are kept
    assert len(prepare_train_data([states]).samples) == 3


def test_openai_endpoint_length_finish_and_no_model_listing() -> None:
    from judger.testing import fake_openai, serve_asgi

    fake = fake_openai.FakeOpenAI(model="m")
    with serve_asgi(fake.app) as server:
        config = SingleTurnAgentLoopConfig(model="m", sample_params={"max_tokens": 5}, logprobs=False)

        async def main() -> list[RolloutState]:
            agent = SingleTurnAgentLoop(config, server.url + "/v1", None, render_prompt=render_messages)
            p = prompt()
            p.prompt_ids = None
            try:
                return await agent.generate_group(p)
            finally:
                await agent.aclose()

        (state,) = asyncio.run(main())
    assert fake.models_requests == 0
    assert state.response == "The a" and state.finish_reason == "length" and state.status == Status.COMPLETED
    assert state.response_ids is None and state.logprobs is None and state.reward is None


async def test_generate_results_are_checked() -> None:
    async def bogus(state: RolloutState) -> dict[str, Any]:
        return {"response": "4", "bogus": 1}

    async def nothing(state: RolloutState) -> None:
        return None

    (bad,) = await SingleTurnAgentLoop(SingleTurnAgentLoopConfig(), bogus, Recorder()).generate_group(
        prompt()
    )
    assert bad.status == Status.FAILED and "unknown fields ['bogus']" in bad.error_msg
    (empty,) = await SingleTurnAgentLoop(SingleTurnAgentLoopConfig(), nothing, Recorder()).generate_group(
        prompt()
    )
    assert empty.status == Status.FAILED and "finish_reason=None" in empty.error_msg


def _url_loop_group(fake: Any, **loop_kw: Any) -> list[RolloutState]:
    from judger.testing import serve_asgi

    with serve_asgi(fake.app) as server:
        config = SingleTurnAgentLoopConfig(group_size=2, sample_params={"max_tokens": 64})

        async def main() -> list[RolloutState]:
            agent = SingleTurnAgentLoop(config, server.url, None, render_prompt=render_messages, **loop_kw)
            try:
                return await agent.generate_group(prompt())
            finally:
                await agent.aclose()

        return asyncio.run(main())


def test_url_form_keeps_the_token_ids_the_server_sampled() -> None:
    """Re-tokenizing the text (here: one id per word) is not what the server sampled."""
    from judger.testing import fake_openai

    fake = fake_openai.FakeOpenAI(model="fake-policy")
    words = {}

    def by_words(text: str) -> list[int]:
        return [words.setdefault(w, len(words)) for w in text.split()]

    states = _url_loop_group(fake, tokenize=by_words)
    body = fake.requests[-1]
    assert body["return_token_ids"] is True and body["return_tokens_as_token_ids"] is True
    for s in states:
        assert s.status == Status.COMPLETED
        assert s.response_ids == [ord(c) for c in s.response]
        assert s.logprobs == [-0.01] * len(s.response_ids)


def test_url_form_refuses_a_server_that_returns_no_token_ids() -> None:
    from judger.testing import fake_openai

    fake = fake_openai.FakeOpenAI(model="fake-policy")
    fake.token_ids = False  # a strict OpenAI server: text and token strings, no ids
    states = _url_loop_group(fake, tokenize=lambda text: [ord(c) for c in text])
    for s in states:
        assert s.status == Status.FAILED and s.response_ids is None
        assert "returned no token ids" in s.error_msg and "re-tokenizing" in s.error_msg
