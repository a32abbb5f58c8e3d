from __future__ import annotations

import asyncio
from typing import Any

import pytest

from judger import (
    BaseJudger,
    ComposedJudger,
    ComposedJudgerConfig,
    Judger,
    JudgerConfig,
    JudgerPayloadBatch,
    NativeJudger,
    RolloutState,
    Status,
    weighted_sum,
)
from judger.judgers.composed import RoutingError

pytestmark = pytest.mark.py310


def correctness(response: str, label: Any, extra_info: dict) -> dict:
    return {"score": float(response.strip() == str(label)), "acc": response.strip() == str(label)}


def fmt(response: str, label: Any, extra_info: dict) -> dict:
    return {"score": 1.0 if response.strip().isdigit() else 0.0}


def length(response: str, label: Any, extra_info: dict) -> dict:
    return {"score": float(len(response))}


def cfg(name: str, fn: Any, **kw: Any) -> JudgerConfig:
    return JudgerConfig(judger_name=name, reward_handler=fn, **kw)


def state(response: str, data_source: Any, label: str = "7") -> RolloutState:
    s = RolloutState(response=response, reward_model={"ground_truth": label})
    s.data_source = data_source  # assignment is not validated, so bad routes reach the judger
    return s


def composed(merge_fn: Any = weighted_sum, **kw: Any) -> ComposedJudger:
    return ComposedJudgerConfig(
        branches={"correctness": cfg("correctness", correctness), "format": cfg("format", fmt)},
        merge_fn=merge_fn,
        **kw,
    ).build()


async def test_str_data_source_runs_one_branch_and_uses_its_reward() -> None:
    judger = composed()
    assert (await judger.judge(state("7", "correctness"))).reward == {"score": 1.0, "acc": True}
    assert (await judger.judge(state("x", "format"))).reward == {"score": 0.0}


async def test_dict_data_source_runs_several_and_weighted_sum_uses_the_weights() -> None:
    s = await composed().judge(state("7", {"correctness": 0.9, "format": 0.1}))
    assert s.reward == {"score": pytest.approx(1.0), "correctness": 1.0, "format": 1.0}
    s = await composed().judge(state("x7", {"correctness": 0.9, "format": 0.1}))
    assert s.reward == {"score": 0.0, "correctness": 0.0, "format": 0.0}
    s = await composed().judge(state("8", {"correctness": 0.9, "format": 0.1}))
    assert s.reward["score"] == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("data_source", "exc", "text"),
    [
        (None, ValueError, "requires rollout_state.data_source"),
        ({}, ValueError, "must contain at least one judger branch"),
        ("nope", KeyError, "Unknown judger branch from data_source: 'nope'"),
        ({"correctness": 1, "nope": 1}, KeyError, "Unknown judger branch from data_source: 'nope'"),
        ({1: 1.0}, TypeError, "keys must be strings"),
        (42, TypeError, "must be a branch name string or a dict"),
        (["correctness"], TypeError, "must be a branch name string or a dict"),
    ],
)
@pytest.mark.parametrize("on_error", ["fail", "raise"])
async def test_routing_errors_raise_whatever_on_error_says(
    data_source: Any, exc: type[Exception], text: str, on_error: str
) -> None:
    # a configuration error, not a sample failure: it never becomes a FAILED sample
    with pytest.raises(exc, match=text) as info:
        await composed(on_error=on_error).judge(state("7", data_source))
    assert isinstance(info.value, RoutingError)
    good = state("7", "correctness")
    with pytest.raises(exc, match=text):
        await composed(on_error=on_error).batch_judge([good, state("7", data_source)])


async def test_several_branches_without_merge_fn_is_a_value_error() -> None:
    judger = composed(merge_fn=None)
    assert (await judger.judge(state("7", "format"))).reward == {"score": 1.0}
    with pytest.raises(ValueError, match="merge_fn is not provided"):
        await judger.judge(state("7", {"correctness": 1, "format": 1}))


async def test_mixed_batch_routes_each_sample_and_keeps_order() -> None:
    routes = ["correctness", "format", {"correctness": 0.5, "format": 0.5}, "format", "format", "correctness"]
    states = [state(r, ds) for r, ds in zip(["7", "x", "7", "7", "3", "6"], routes)]
    out = await composed().batch_judge(states)
    assert all(a is b for a, b in zip(out, states))
    assert out[0].reward == {"score": 1.0, "acc": True}
    assert out[1].reward == {"score": 0.0}
    assert out[2].reward == {"score": 1.0, "correctness": 1.0, "format": 1.0}
    assert out[3].reward == {"score": 1.0}
    assert out[4].reward == {"score": 1.0}
    assert out[5].reward == {"score": 0.0, "acc": False}


class CountingBatch(Judger):
    def __init__(self) -> None:
        super().__init__("counting")
        self.batches: list[int] = []

    async def judge_payload(self, payload: JudgerPayloadBatch) -> Any:
        if isinstance(payload, list):
            self.batches.append(len(payload))
            return [{"score": 1.0} for _ in payload]
        self.batches.append(1)
        return {"score": 1.0}


async def test_each_branch_gets_one_batched_call() -> None:
    a, b = CountingBatch(), CountingBatch()
    judger = ComposedJudger({"a": a, "b": b}, merge_fn=weighted_sum)
    states = [state("1", "a"), state("1", "b"), state("1", {"a": 1, "b": 1}), state("1", "a")]
    await judger.batch_judge(states)
    assert a.batches == [3] and b.batches == [2]


async def test_a_failing_branch_fails_only_its_samples() -> None:
    def boom(response: str, label: Any, extra_info: dict) -> dict:
        if response == "boom":
            raise RuntimeError("branch exploded")
        return {"score": 1.0}

    judger = ComposedJudger(
        {"ok": NativeJudger("ok", correctness), "boom": NativeJudger("boom", boom)}, weighted_sum
    )
    out = await judger.batch_judge([state("boom", {"ok": 1, "boom": 1}), state("7", {"ok": 1, "boom": 1})])
    assert out[0].status is Status.FAILED and "branch exploded" in out[0].error_msg
    assert out[0].extra_fields["judge_failure"]["judger"] == "boom"
    assert out[1].reward == {"score": 2.0, "ok": 1.0, "boom": 1.0}


async def test_async_merge_fn_and_its_result_is_validated() -> None:
    async def merge(original: RolloutState, judged: dict) -> RolloutState:
        await asyncio.sleep(0)
        original.reward = {"score": judged["correctness"]["score"] * 10, "parts": sorted(judged)}
        return original

    s = await composed(merge_fn=merge).judge(state("7", {"correctness": 1, "format": 1}))
    assert s.reward == {"score": 10.0, "parts": ["correctness", "format"]}

    def bad_merge(original: RolloutState, judged: dict) -> Any:
        return {"score": 1.0}

    s = await composed(merge_fn=bad_merge).judge(state("7", {"correctness": 1, "format": 1}))
    assert s.status is Status.FAILED and "merge_fn returned dict" in s.error_msg


async def test_seed_style_merge_fn_with_weight_fn() -> None:
    def weight_fn(name: str) -> float:
        return {"correctness": 0.9, "format": 0.1}[name]

    def merge_rewards(original: RolloutState, judged: dict) -> RolloutState:
        scores = {name: out["score"] for name, out in judged.items()}
        original.reward = {"score": sum(weight_fn(n) * v for n, v in scores.items()), **scores}
        return original

    s = await composed(merge_fn=merge_rewards).batch_judge([state("8", {"correctness": 1, "format": 1})])
    assert s[0].reward == {"score": pytest.approx(0.1), "correctness": 0.0, "format": 1.0}


async def test_merge_fn_by_import_string() -> None:
    judger = composed(merge_fn="judger.judgers.composed:weighted_sum")
    assert judger.merge_fn is weighted_sum


async def test_nested_composed_configs() -> None:
    inner = ComposedJudgerConfig(
        branches={"correctness": cfg("correctness", correctness), "format": cfg("format", fmt)},
        merge_fn=weighted_sum,
        judger_name="math",
    )
    outer = ComposedJudgerConfig(
        branches={"math": inner, "length": cfg("length", length)}, merge_fn=weighted_sum
    ).build()
    # the inner composition is selected by its name and runs all its branches
    s = await outer.judge(state("7", "math"))
    assert s.reward == {"score": 2.0, "correctness": 1.0, "format": 1.0}
    # selected together with a sibling: merge_fn sees the inner's merged reward
    s = await outer.judge(state("7", {"math": 0.5, "length": 2.0}))
    assert s.reward == {"score": pytest.approx(0.5 * 2.0 + 2.0 * 1.0), "math": 2.0, "length": 1.0}
    out = await outer.batch_judge([state("77", "length"), state("7", "math")])
    assert out[0].reward == {"score": 2.0} and out[1].reward["score"] == 2.0


class OnlyBase(BaseJudger):
    async def judge(self, rollout_state: RolloutState) -> RolloutState:
        return rollout_state


def test_base_judger_only_branch_is_a_type_error_at_build() -> None:
    with pytest.raises(TypeError, match="must inherit Judger, not only BaseJudger"):
        ComposedJudger({"a": OnlyBase()})
    with pytest.raises(TypeError, match="must inherit Judger, not only BaseJudger"):
        ComposedJudgerConfig(branches={"a": OnlyBase()})
    with pytest.raises(TypeError, match="must be a Judger"):
        ComposedJudger({"a": object()})  # type: ignore[dict-item]


def test_empty_branches_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="at least one branch"):
        ComposedJudger({})
    with pytest.raises(ValueError, match="branches is empty"):
        ComposedJudgerConfig(branches={})


def test_weighted_sum_rejects_bad_weights_and_missing_scores() -> None:
    for weight in ("heavy", True, float("nan"), float("inf"), 10**400):
        # a NaN or an infinity would make the sample's score one no trainer can use
        with pytest.raises(TypeError, match="weight of branch 'a'"):
            weighted_sum(RolloutState(data_source={"a": weight}), {"a": {"score": 1.0}})
    assert weighted_sum(RolloutState(data_source={"a": 2}), {"a": {"score": 0.5}}).reward["score"] == 1.0
    with pytest.raises(KeyError, match="no 'score'"):
        weighted_sum(RolloutState(data_source={"a": 1}), {"a": {"acc": True}})


# --- merge_fn in the seed's list form ----------------------------------------------


def list_merge(original, judged):  # unannotated, as XTuner users write it
    # written for batch mode only: indexes the outputs by position
    for i, s in enumerate(original):
        s.reward = {"score": judged["correctness"][i]["score"] + judged["format"][i]["score"], "i": i}
    return original


async def test_list_form_merge_fn_is_called_once_per_branch_set_with_lists() -> None:
    calls: list[int] = []

    def merge(original: list[RolloutState], judged: dict[str, list[dict]]) -> list[RolloutState]:
        calls.append(len(original))
        return list_merge(original, judged)

    both = {"correctness": 1, "format": 1}
    states = [state("7", both), state("x", "format"), state("8", both), state("77", both)]
    out = await composed(merge_fn=merge).batch_judge(states)
    assert calls == [3]  # one call for the three two-branch samples, in their input order
    assert [s.reward for s in out] == [
        {"score": 2.0, "i": 0},
        {"score": 0.0},
        {"score": 1.0, "i": 1},
        {"score": 1.0, "i": 2},
    ]
    # judge() gives a list-form merge_fn lists of one
    s = await composed(merge_fn=merge).judge(state("7", both))
    assert s.reward == {"score": 2.0, "i": 0}


async def test_unannotated_list_merge_fn_with_merge_batch_and_a_clear_hint_without() -> None:
    both = {"correctness": 1, "format": 1}
    judger = ComposedJudgerConfig(
        branches={"correctness": cfg("correctness", correctness), "format": cfg("format", fmt)},
        merge_fn=list_merge,
        merge_batch=True,
    ).build()
    out = await judger.batch_judge([state("7", both), state("8", both)])
    assert [s.reward for s in out] == [{"score": 2.0, "i": 0}, {"score": 1.0, "i": 1}]
    # without the flag it is called per sample; the failure (KeyError: 0 before) says what to do
    s = await composed(merge_fn=list_merge).judge(state("7", both))
    assert s.status is Status.FAILED and "merge_batch=True" in s.error_msg


async def test_weighted_sum_takes_the_list_form_too() -> None:
    weights = {"correctness": 0.5, "format": 2.0}
    judger = composed(merge_fn=weighted_sum, merge_batch=True)
    out = await judger.batch_judge([state("7", weights), state("8", weights)])
    assert [s.reward["score"] for s in out] == [pytest.approx(2.5), pytest.approx(2.0)]


async def test_list_merge_returning_a_wrong_length_fails_its_samples() -> None:
    def short(original: list[RolloutState], judged: dict) -> list[RolloutState]:
        return original[:1]

    both = {"correctness": 1, "format": 1}
    out = await composed(merge_fn=short).batch_judge([state("7", both), state("8", both)])
    assert all(s.status is Status.FAILED and "returned 1 states for 2" in s.error_msg for s in out)


async def test_nested_list_form_merges_inside_a_list_form_batch() -> None:
    def merge(original: list[RolloutState], judged: dict[str, list[dict]]) -> list[RolloutState]:
        return weighted_sum(original, judged)

    inner = ComposedJudgerConfig(
        branches={"correctness": cfg("correctness", correctness), "format": cfg("format", fmt)},
        merge_fn=merge,
        judger_name="math",
    )
    outer = ComposedJudgerConfig(
        branches={"math": inner, "length": cfg("length", length)}, merge_fn=merge
    ).build()
    out = await outer.batch_judge(
        [state("7", {"math": 0.5, "length": 2.0}), state("8", {"math": 1, "length": 1})]
    )
    assert [s.reward["score"] if s.reward else s.error_msg for s in out] == [
        pytest.approx(0.5 * 2.0 + 2.0 * 1.0),
        pytest.approx(1.0 * 1.0 + 1.0 * 1.0),
    ]


async def test_batch_judge_hands_single_branch_groups_to_the_branch_fast_path() -> None:
    # a default-routing ComposedJudger (what `judger score` builds) took the generic
    # per-payload path; each branch's group now goes through that branch's own batch_judge
    from judger import GSM8KJudgerConfig, QAExactMatchJudgerConfig
    from judger.trainer.io import example_data, read_rollouts

    gsm, qa = GSM8KJudgerConfig(), QAExactMatchJudgerConfig()
    judger = ComposedJudgerConfig(branches={"gsm8k": gsm, "qa": qa}).build()
    calls: list[tuple[str, int]] = []
    for name, branch in judger.branches.items():
        own = branch.batch_judge

        async def spy(states: list[RolloutState], own: Any = own, name: str = name) -> list[RolloutState]:
            calls.append((name, len(states)))
            return await own(states)

        branch.batch_judge = spy  # type: ignore[method-assign]
    rows = read_rollouts(example_data()).states[:30]
    mixed = []
    for i, row in enumerate(rows):
        s = row.model_copy(deep=True)
        s.data_source = ["gsm8k", "qa", "qa"][i % 3]
        mixed.append(s)
    unroutable = [*mixed[:5], mixed[5].model_copy(update={"data_source": None})]
    with pytest.raises(RoutingError, match="data_source"):  # raised before any branch is called
        await judger.batch_judge(unroutable)
    assert calls == []
    out = await judger.batch_judge(mixed)
    assert sorted(calls) == [("gsm8k", 10), ("qa", 20)]
    # the same rewards as each preset alone, and the routing errors as before
    gsm_alone = await gsm.build().batch_judge([s.model_copy(deep=True) for s in mixed[0::3]])
    qa_states = [s for s in mixed if s.data_source == "qa"]
    qa_alone = await qa.build().batch_judge([s.model_copy(deep=True) for s in qa_states])
    assert [s.reward for s in out[0::3]] == [s.reward for s in gsm_alone]
    assert [s.reward for s in out if s.data_source == "qa"] == [s.reward for s in qa_alone]
    singles = [await judger.judge(s.model_copy(deep=True)) for s in mixed[:2]]
    assert [s.reward for s in singles] == [out[0].reward, out[1].reward]
