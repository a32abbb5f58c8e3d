"""The payload contract of the second seed, on a Judger subclass written as the seed shows."""

from __future__ import annotations

import asyncio
from fractions import Fraction
from typing import Any

import pytest

from judger import (
    BaseJudger,
    Judger,
    JudgerOutput,
    JudgerPayload,
    JudgerPayloadBatch,
    RolloutState,
    Status,
)

pytestmark = pytest.mark.py310


class ToolJudger(Judger):
    """The seed's example, verbatim in behaviour: it cannot take lists."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("tool_judger", **kwargs)
        self.calls: list[Any] = []

    def preprocess(self, rollout_state: RolloutState) -> JudgerPayload:
        return {
            "response": rollout_state.response,
            "label": rollout_state.reward_model["ground_truth"],
            "tool_ok": rollout_state.extra_fields.get("tool_ok", False),
        }

    async def judge_payload(self, payload: JudgerPayloadBatch) -> JudgerOutput:
        self.calls.append(payload)
        assert not isinstance(payload, list)
        ok = payload["tool_ok"] and (payload["response"] or "").strip() == payload["label"]
        return {"score": 1.0 if ok else 0.0, "tool_ok": payload["tool_ok"]}

    def postprocess(self, rollout_state: RolloutState, output: JudgerOutput) -> RolloutState:
        rollout_state.reward = {"score": output["score"], "tool_ok": output["tool_ok"]}
        return rollout_state


class ListJudger(Judger):
    """Takes a list and returns a list; counts calls."""

    def __init__(self, result: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.batch_calls = 0
        self.result = result

    async def judge_payload(self, payload: JudgerPayloadBatch) -> Any:
        if self.result is not None:
            return self.result
        if isinstance(payload, list):
            self.batch_calls += 1
            return [{"score": float(p["response"] == p["label"])} for p in payload]
        return {"score": float(payload["response"] == payload["label"])}


def state(response: str, label: str = "1", **kw: Any) -> RolloutState:
    return RolloutState(response=response, reward_model={"ground_truth": label}, **kw)


async def test_judge_runs_preprocess_judge_payload_postprocess() -> None:
    judger = ToolJudger()
    s = await judger.judge(state("1", extra_fields={"tool_ok": True}))
    assert s.reward == {"score": 1.0, "tool_ok": True}
    assert judger.calls == [{"response": "1", "label": "1", "tool_ok": True}]
    assert judger.get_judger_name() == "tool_judger"


async def test_batch_judge_on_a_single_payload_judger_falls_back_per_sample() -> None:
    judger = ToolJudger()
    states = [state("1", extra_fields={"tool_ok": True}), state("2", extra_fields={"tool_ok": True})]
    out = await judger.batch_judge(states)
    assert [s.reward["score"] for s in out] == [1.0, 0.0]
    assert all(s.status is not Status.FAILED for s in out)


async def test_batch_judge_calls_judge_payload_once_with_the_list() -> None:
    judger = ListJudger()
    out = await judger.batch_judge([state("1"), state("2"), state("1")])
    assert judger.batch_calls == 1
    assert [s.reward for s in out] == [{"score": 1.0}, {"score": 0.0}, {"score": 1.0}]


def test_default_preprocess_payload() -> None:
    s = state("x", data_source="d", task_name="t", message=[{"role": "user", "content": "q"}])
    payload = ListJudger().preprocess(s)
    assert payload == {
        "response": "x",
        "label": "1",
        "message": s.message,
        "status": Status.INIT,
        "data_source": "d",
        "task_name": "t",
    }
    assert ListJudger().preprocess(RolloutState(response="x"))["label"] is None


async def test_list_for_a_single_payload_is_a_type_error_naming_the_judger() -> None:
    judger = ListJudger(result=[{"score": 1.0}], judger_name="lister", on_error="raise")
    with pytest.raises(TypeError, match="lister.*list for a single payload"):
        await judger.judge(state("1"))


async def test_batch_length_mismatch_and_non_list_raise_with_on_error_raise() -> None:
    with pytest.raises(ValueError, match="'short'.*1 outputs for 2 payloads"):
        await ListJudger(result=[{"score": 1.0}], judger_name="short", on_error="raise").batch_judge(
            [state("1"), state("2")]
        )
    with pytest.raises(TypeError, match="'dicty'.*returned dict for a batch of 2"):
        await ListJudger(result={"score": 1.0}, judger_name="dicty", on_error="raise").batch_judge(
            [state("1"), state("2")]
        )


class OneAtATimeJudger(Judger):
    """A judge_payload written for one payload: given a list, it answers one dict (of the first)."""

    async def judge_payload(self, payload: JudgerPayloadBatch) -> Any:
        one = payload[0] if isinstance(payload, list) else payload
        return {"score": float(one["response"] == one["label"])}


async def test_a_batch_shape_error_falls_back_to_one_call_per_sample(
    caplog: pytest.LogCaptureFixture,
) -> None:
    judger = OneAtATimeJudger(judger_name="one")
    batch = await judger.batch_judge([state("1"), state("2"), state("1")])
    singles = [await judger.judge(s) for s in [state("1"), state("2"), state("1")]]
    assert (
        [s.reward for s in batch]
        == [s.reward for s in singles]
        == [{"score": 1.0}, {"score": 0.0}, {"score": 1.0}]
    )
    assert "returned dict for a batch of 3" in caplog.text and "each payload on its own" in caplog.text
    # a judger that cannot answer one payload either: each sample fails alone, with its reason
    out = await ListJudger(result=[{"score": 1.0}], judger_name="short").batch_judge([state("1"), state("2")])
    assert all(s.status is Status.FAILED and "list for a single payload" in s.error_msg for s in out)


async def test_bad_output_in_a_batch_names_the_index_and_fails_only_that_sample() -> None:
    judger = ListJudger(result=[{"score": 1.0}, {"score": "high"}, "nope"], judger_name="mixed")
    out = await judger.batch_judge([state("a"), state("b"), state("c")])
    assert out[0].reward == {"score": 1.0} and out[0].status is Status.INIT
    assert (
        out[1].status is Status.FAILED
        and "batch index 1" in out[1].error_msg
        and "'high'" in out[1].error_msg
    )
    assert (
        out[2].status is Status.FAILED
        and "batch index 2" in out[2].error_msg
        and "must return a dict" in out[2].error_msg
    )


@pytest.mark.parametrize(
    ("score", "expected"),
    [(True, 1.0), (False, 0.0), (1, 1.0), (0.5, 0.5)],
)
async def test_scores_are_coerced_to_float(score: Any, expected: float) -> None:
    s = await ListJudger(result={"score": score}).judge(state("1"))
    assert s.reward["score"] == expected and type(s.reward["score"]) is float


@pytest.mark.parametrize(
    "score",
    # numbers no float holds were an OverflowError, not the judger's output named
    [
        float("nan"),
        float("inf"),
        "1.0",
        None,
        [1.0],
        pytest.param(10**400, id="int past float's range"),
        pytest.param(Fraction(10**400, 3), id="Fraction past float's range"),
    ],
)
async def test_non_finite_or_non_numeric_scores_are_errors(score: Any) -> None:
    s = await ListJudger(result={"score": score}, judger_name="sc").judge(state("1"))
    assert s.status is Status.FAILED and s.reward is None
    assert s.error_msg.startswith("JudgerOutputError") and "'sc'" in s.error_msg


async def test_numpy_scores_are_accepted() -> None:
    np = pytest.importorskip("numpy")
    s = await ListJudger(result={"score": np.float32(0.25)}).judge(state("1"))
    assert s.reward["score"] == 0.25
    s = await ListJudger(result={"score": np.bool_(True)}).judge(state("1"))
    assert s.reward["score"] == 1.0


async def test_output_without_score_is_allowed() -> None:
    s = await ListJudger(result={"correctness": 1.0}).judge(state("1"))
    assert s.reward == {"correctness": 1.0}


class Slow(Judger):
    async def judge_payload(self, payload: JudgerPayloadBatch) -> Any:
        await asyncio.sleep(10)
        return {"score": 1.0}


async def test_deadline_marks_timeout_failure() -> None:
    s = await Slow(timeout=0.05).judge(state("1"))
    assert s.status is Status.FAILED and "timeout" in s.error_msg
    assert s.extra_fields["judge_failure"] == {"judger": "Slow", "kind": "timeout"}


class OwnTimeout(Judger):
    async def judge_payload(self, payload: JudgerPayloadBatch) -> Any:
        raise TimeoutError("upstream grader timed out after 2 s")


async def test_a_timeout_raised_by_the_judger_itself_keeps_its_message() -> None:
    s = await OwnTimeout().judge(state("1"))
    assert s.error_msg == "TimeoutError: timeout: upstream grader timed out after 2 s"
    assert s.extra_fields["judge_failure"]["kind"] == "timeout"
    out = await OwnTimeout().batch_judge([state("1"), state("2")])
    assert all(x.error_msg == "TimeoutError: timeout: upstream grader timed out after 2 s" for x in out)


async def test_on_error_raise_propagates() -> None:
    with pytest.raises(TimeoutError):
        await Slow(timeout=0.05, on_error="raise").judge(state("1"))


class Exploding(Judger):
    async def judge_payload(self, payload: JudgerPayloadBatch) -> Any:
        if isinstance(payload, list):
            raise RuntimeError("batch path broken")
        if payload["response"] == "bad":
            raise ValueError("cannot parse 'bad'")
        return {"score": 1.0}


async def test_a_failing_sample_does_not_fail_the_batch() -> None:
    out = await Exploding().batch_judge([state("ok"), state("bad"), state("ok")])
    assert [s.status for s in out] == [Status.INIT, Status.FAILED, Status.INIT]
    assert out[1].error_msg == "ValueError: cannot parse 'bad'" and out[1].reward is None
    assert out[0].reward == {"score": 1.0}


class BadPre(ListJudger):
    def preprocess(self, rollout_state: RolloutState) -> JudgerPayload:
        if rollout_state.reward_model is None:
            raise KeyError("reward_model")
        return super().preprocess(rollout_state)


async def test_preprocess_failure_is_per_sample() -> None:
    out = await BadPre().batch_judge([state("1"), RolloutState(response="1"), state("1")])
    assert [s.status for s in out] == [Status.INIT, Status.FAILED, Status.INIT]
    assert out[1].error_msg.startswith("KeyError")


def test_policy_is_validated() -> None:
    with pytest.raises(ValueError, match="on_error"):
        ListJudger(on_error="ignore")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout"):
        ListJudger(timeout=0)


class Whole(BaseJudger):
    async def judge(self, rollout_state: RolloutState) -> RolloutState:
        rollout_state.reward = {"score": 2.0}
        return rollout_state


async def test_base_judger_batch_judge_defaults_to_judge_each() -> None:
    out = await Whole().batch_judge([state("1"), state("2")])
    assert [s.reward for s in out] == [{"score": 2.0}] * 2
    assert Whole().get_judger_name() == "Whole"


async def test_async_context_manager_closes() -> None:
    closed: list[str] = []

    class Closing(ListJudger):
        async def aclose(self) -> None:
            closed.append(self.judger_name)

    async with Closing() as judger:
        assert (await judger.judge(state("1"))).reward == {"score": 1.0}
        assert closed == []
    assert closed == [judger.judger_name]


def test_sync_context_manager_closes() -> None:
    closed: list[bool] = []

    class Closing(ListJudger):
        async def aclose(self) -> None:
            closed.append(True)

    with Closing():
        assert closed == []
    assert closed == [True]


def test_failures_round_trip_through_pickle_and_exceptions() -> None:
    import pickle

    from judger.core.errors import JudgeTimeoutError
    from judger.core.failure import JudgeFailure

    err = JudgeTimeoutError("slow", 1.5, "batch of 3")
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is JudgeTimeoutError and str(again) == str(err) and again.timeout == 1.5
    failure = JudgeFailure.from_exception(err, "slow")
    assert failure.kind == "timeout" and failure.message.startswith("JudgeTimeoutError: timeout:")
    assert JudgeFailure.from_exception(failure.to_exception(), "slow") == failure
    boom = JudgeFailure.from_exception(ValueError("bad label"), "j")
    assert (boom.kind, boom.message) == ("error", "ValueError: bad label")
    assert pickle.loads(pickle.dumps(boom)) == boom


def test_failure_of_reads_back_what_mark_failed_recorded() -> None:
    from judger.core.failure import JudgeFailure, failure_of, mark_failed

    failure = JudgeFailure(judger="j", kind="timeout", message="JudgeTimeoutError: timeout: slow")
    failed = mark_failed(state("1"), failure)
    assert failure_of(failed) == failure
    assert failure_of(state("1")) is None
    bare = state("1")
    bare.status, bare.error_msg = Status.FAILED, None  # failed elsewhere, without the record
    assert failure_of(bare, "server") == JudgeFailure("server", "error", "judging failed")


async def test_batch_judge_honours_a_postprocess_set_on_the_instance() -> None:
    # batch_judge writes default rewards itself; a postprocess replaced on the instance (not the
    # class) must still be the one that runs
    class Echo(Judger):
        async def judge_payload(self, payload: Any) -> Any:
            items = payload if isinstance(payload, list) else [payload]
            out = [{"score": 1.0} for _ in items]
            return out if isinstance(payload, list) else out[0]

    judger = Echo("echo")
    seen: list[dict[str, Any]] = []

    def mine(state: RolloutState, output: dict[str, Any]) -> RolloutState:
        seen.append(output)
        state.reward = {**output, "mine": True}
        return state

    judger.postprocess = mine  # type: ignore[method-assign]
    out = await judger.batch_judge([RolloutState(response="a"), RolloutState(response="b")])
    assert [s.reward for s in out] == [{"score": 1.0, "mine": True}] * 2 and len(seen) == 2
