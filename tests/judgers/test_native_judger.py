from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from judger import JudgerConfig, NativeJudger, RolloutState, Status, batch_handler
from judger.testing.handlers import exact_match

pytestmark = pytest.mark.py310


def state(response: str, label: Any = "1", **kw: Any) -> RolloutState:
    return RolloutState(response=response, reward_model={"ground_truth": label}, **kw)


async def test_sync_handler() -> None:
    judger = NativeJudger(reward_handler=exact_match)
    s = await judger.judge(state("1"))
    assert s.reward == {"score": 1.0, "acc": True, "pred": "1"}
    assert judger.get_judger_name() == "native_judger"


async def test_async_handler() -> None:
    async def reward(response: str, label: str, extra_info: dict) -> dict:
        await asyncio.sleep(0)
        return {"score": float(response == label)}

    out = await NativeJudger(reward_handler=reward).batch_judge([state("1"), state("0")])
    assert [s.reward["score"] for s in out] == [1.0, 0.0]


async def test_import_string_handler() -> None:
    judger = JudgerConfig(judger_name="m", reward_handler="judger.testing.handlers:exact_match").build()
    assert (await judger.judge(state("1"))).reward["acc"] is True


def test_bad_import_string_fails_at_build() -> None:
    cfg = JudgerConfig(judger_name="m", reward_handler="judger.testing.handlers:nope")
    with pytest.raises(ValueError, match="has no attribute 'nope'"):
        cfg.build()
    with pytest.raises(ValueError, match="cannot import module"):
        JudgerConfig(judger_name="m", reward_handler="no_such_pkg.mod:f").build()


async def test_handler_gets_response_label_and_a_copy_of_extra_info() -> None:
    seen: list[tuple] = []

    def reward(response: str, label: Any, extra_info: dict) -> dict:
        seen.append((response, label, dict(extra_info)))
        extra_info["mutated"] = True
        return {"score": 0.0}

    judger = NativeJudger(reward_handler=reward, extra_info={"k": 1})
    await judger.judge(state("a", label=[1, 2]))
    await judger.judge(state("b", extra_fields={"extra_info": {"index": 7}}))
    assert seen == [("a", [1, 2], {"k": 1}), ("b", "1", {"k": 1, "index": 7})]
    assert judger.extra_info == {"k": 1}


async def test_sync_handler_does_not_block_the_event_loop() -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    def slow(response: str, label: Any, extra_info: dict) -> dict:
        time.sleep(0.3)
        return {"score": 1.0}

    task = asyncio.create_task(ticker())
    await NativeJudger(reward_handler=slow).judge(state("1"))
    await NativeJudger(reward_handler=slow).batch_judge([state("1"), state("1")])
    task.cancel()
    # the loop kept turning while the handler slept (a blocked loop would tick about twice)
    assert ticks >= 20


async def test_sync_handler_runs_off_the_event_loop_thread() -> None:
    threads: set[int] = set()

    def reward(response: str, label: Any, extra_info: dict) -> dict:
        threads.add(threading.get_ident())
        return {"score": 1.0}

    await NativeJudger(reward_handler=reward).batch_judge([state("1")] * 10)
    assert threading.get_ident() not in threads


async def test_batch_handler_is_called_once_with_lists() -> None:
    calls: list[tuple] = []

    @batch_handler
    def reward(responses: list, labels: list, extra_infos: list) -> list:
        calls.append((responses, labels, extra_infos))
        return [{"score": float(r == lab)} for r, lab in zip(responses, labels)]

    out = await NativeJudger(reward_handler=reward, extra_info={"e": 1}).batch_judge(
        [state("1"), state("2"), state("1")]
    )
    assert len(calls) == 1 and calls[0][0] == ["1", "2", "1"] and calls[0][2] == [{"e": 1}] * 3
    assert [s.reward["score"] for s in out] == [1.0, 0.0, 1.0]
    single = await NativeJudger(reward_handler=reward).judge(state("1"))
    assert single.reward == {"score": 1.0}


async def test_batch_handler_returning_wrong_length_fails_every_sample_clearly() -> None:
    async def reward(responses: list, labels: list, extra_infos: list) -> list:
        return [{"score": 1.0}]

    out = await NativeJudger(reward_handler=reward, batched=True, judger_name="b").batch_judge(
        [state("1"), state("2")]
    )
    assert all(s.status is Status.FAILED for s in out)
    assert "returned 1 results for 2 samples" in out[0].error_msg


async def test_async_handlers_run_with_bounded_concurrency() -> None:
    running = peak = 0

    async def reward(response: str, label: Any, extra_info: dict) -> dict:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.005)
        running -= 1
        return {"score": 1.0}

    out = await NativeJudger(reward_handler=reward, max_concurrency=7).batch_judge([state("1")] * 100)
    assert peak == 7 and all(s.reward == {"score": 1.0} for s in out)


def flaky(response: str, label: Any, extra_info: dict) -> dict:
    if response == "raise":
        raise RuntimeError(f"cannot score {response}")
    if response == "nan":
        return {"score": float("nan")}
    if response == "notdict":
        return 1.0  # type: ignore[return-value]
    return {"score": float(response == str(label)), "index": int(extra_info.get("i", -1))}


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_failures_in_a_batch_of_1000_are_isolated_and_order_kept(kind: str) -> None:
    bad = {13: "raise", 500: "nan", 777: "notdict"}
    states = [
        state(bad.get(i, str(i % 2)), label="1", extra_fields={"extra_info": {"i": i}}) for i in range(1000)
    ]
    handler: Any = flaky
    if kind == "async":

        async def handler(response: str, label: Any, extra_info: dict) -> dict:
            return flaky(response, label, extra_info)

    out = await NativeJudger(reward_handler=handler, judger_name="flaky").batch_judge(states)
    assert len(out) == 1000 and all(a is b for a, b in zip(out, states))
    for i, s in enumerate(out):
        if i in bad:
            assert (
                s.status is Status.FAILED
                and s.reward is None
                and "flaky" in s.extra_fields["judge_failure"]["judger"]
            )
        else:
            assert s.status is Status.INIT and s.reward == {"score": float(i % 2), "index": i}
    assert out[13].error_msg == "RuntimeError: cannot score raise"
    assert "score=nan" in out[500].error_msg and "must return a dict" in out[777].error_msg


async def test_a_hung_sync_sample_times_out_and_the_rest_complete() -> None:
    release = threading.Event()

    def reward(response: str, label: Any, extra_info: dict) -> dict:
        if response == "hang":
            release.wait(5)
        return {"score": 1.0}

    states = [state("hang" if i == 3 else "1") for i in range(40)]
    judger = NativeJudger(reward_handler=reward, timeout=0.3, num_threads=2)
    started = time.monotonic()
    out = await judger.batch_judge(states)
    elapsed = time.monotonic() - started
    release.set()
    assert elapsed < 3
    assert out[3].status is Status.FAILED and "timeout" in out[3].error_msg
    assert out[3].extra_fields["judge_failure"]["kind"] == "timeout"
    assert all(s.reward == {"score": 1.0} for i, s in enumerate(out) if i != 3)
    await judger.aclose()


async def test_a_hung_async_sample_times_out() -> None:
    async def reward(response: str, label: Any, extra_info: dict) -> dict:
        if response == "hang":
            await asyncio.sleep(30)
        return {"score": 1.0}

    out = await NativeJudger(reward_handler=reward, timeout=0.2).batch_judge(
        [state("1"), state("hang"), state("1")]
    )
    assert [s.status for s in out] == [Status.INIT, Status.FAILED, Status.INIT]


async def test_on_error_raise_propagates_the_handler_exception() -> None:
    with pytest.raises(RuntimeError, match="cannot score raise"):
        await NativeJudger(reward_handler=flaky, on_error="raise").batch_judge([state("1"), state("raise")])


async def test_verl_style_compute_score_is_a_valid_handler() -> None:
    seen: list[tuple] = []

    def compute_score(
        data_source: str, solution_str: str, ground_truth: str, extra_info: dict | None = None, **kw: Any
    ) -> float:
        seen.append((data_source, solution_str, ground_truth, extra_info, kw))
        return 1.0 if solution_str == ground_truth else 0.0

    judger = NativeJudger(reward_handler=compute_score, handler_kwargs={"threshold": 0.5})
    out = await judger.batch_judge([state("1", data_source="openai/gsm8k")])
    assert out[0].reward == {"score": 1.0}  # verl's convention: a bare float is the score
    assert seen == [("openai/gsm8k", "1", "1", {}, {"threshold": 0.5})]


async def test_verl_batch_signature_is_detected() -> None:
    def compute_score(
        data_sources: list, solution_strs: list, ground_truths: list, extra_infos: list
    ) -> list:
        return [
            {"score": float(s == g), "ds": d} for d, s, g in zip(data_sources, solution_strs, ground_truths)
        ]

    judger = NativeJudger(reward_handler=compute_score)
    assert judger.handler.batched and judger.handler.signature == "verl"
    out = await judger.batch_judge([state("1", data_source="a"), state("2", data_source="b")])
    assert [s.reward for s in out] == [{"score": 1.0, "ds": "a"}, {"score": 0.0, "ds": "b"}]


@pytest.mark.parametrize(
    ("value", "expected"), [(True, 1.0), (3, 3.0), ((0.5, "why"), 0.5), ({"score": 2}, 2.0)]
)
async def test_verl_return_values_are_normalised(value: Any, expected: float) -> None:
    async def compute_score(
        data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None
    ) -> Any:
        return value

    assert (await NativeJudger(reward_handler=compute_score).judge(state("1"))).reward["score"] == expected


def test_handler_must_be_given_and_callable() -> None:
    with pytest.raises(ValueError, match="reward_handler is None"):
        NativeJudger()
    with pytest.raises(TypeError, match="must be callable"):
        NativeJudger(reward_handler=42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="has no reward_handler"):
        JudgerConfig(judger_name="x").build()


def test_usable_from_plain_sync_code_across_event_loops() -> None:
    judger = NativeJudger(reward_handler=exact_match)
    for _ in range(2):
        assert asyncio.run(judger.judge(state("1"))).reward["score"] == 1.0
    judger.close()


async def test_a_hung_sample_fails_only_itself_when_calls_share_one_thread() -> None:
    # a Ray actor with half a CPU has one thread and runs several chunks at once. The
    # chunk queued behind the hung call used to start its deadline while queued and failed its
    # first (innocent) sample; the deadline now starts when a thread picks the sample up.
    release = threading.Event()

    def reward(response: str, label: Any, extra_info: dict) -> dict:
        if response == "hang":
            release.wait(10)
        return {"score": 1.0}

    judger = NativeJudger(reward_handler=reward, timeout=0.5, num_threads=1)
    try:
        first = [state("hang"), state("1"), state("1")]
        second = [state("1") for _ in range(5)]
        singles = [state("1") for _ in range(3)]
        await asyncio.gather(
            judger.batch_judge(first), judger.batch_judge(second), *(judger.judge(s) for s in singles)
        )
        assert first[0].status is Status.FAILED and "within 0.5 s" in first[0].error_msg
        others = first[1:] + second + singles
        assert [s.status for s in others].count(Status.FAILED) == 0
        assert [s.reward["score"] for s in others] == [1.0] * len(others)
    finally:
        release.set()
        await judger.aclose()
