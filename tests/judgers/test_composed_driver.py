"""ComposedJudger's batch path -- route -> group -> judge -> merge -- runs the same overrides and the
same merge as ``judge``, whichever form ``merge_fn`` takes, and a composition judged while another's
batch is in progress merges its own samples."""

from __future__ import annotations

from typing import Any

import pytest

from judger import ComposedJudger, ComposedJudgerConfig, Judger, JudgerConfig, RolloutState, batch_handler
from judger.core.judger import JudgerOutputBatch, JudgerPayloadBatch

pytestmark = pytest.mark.py310


def exact(response: str, label: Any, extra_info: Any) -> dict[str, Any]:
    return {"score": float(response.strip() == str(label))}


def short(response: str, label: Any, extra_info: Any) -> dict[str, Any]:
    return {"score": float(len(response) < 3)}


def composed(merge_fn: Any = None) -> ComposedJudger:
    branches = {
        "exact": JudgerConfig(judger_name="exact", reward_handler=exact),
        "short": JudgerConfig(judger_name="short", reward_handler=short),
    }
    return ComposedJudgerConfig(branches=branches, merge_fn=merge_fn).build()


def state(response: str, data_source: Any) -> RolloutState:
    s = RolloutState(response=response, reward_model={"ground_truth": "7"})
    s.data_source = data_source
    return s


def mixed() -> list[RolloutState]:
    return [
        state("7", "exact"),
        state("8", "short"),
        state("7", {"exact": 1, "short": 1}),
        state("x y", "exact"),
    ]


def tag(rollout_state: RolloutState, output: dict[str, Any]) -> RolloutState:
    rollout_state.reward = {"score": output.get("score", -1.0), "tagged": True}
    return rollout_state


def summed(original: RolloutState, judged: dict[str, dict[str, Any]]) -> RolloutState:
    # builds a new state instead of writing into the one it was given
    total = sum(out["score"] for out in judged.values())
    return original.model_copy(update={"reward": {"score": total}})


async def test_a_postprocess_given_to_a_composition_instance_runs_in_batch_judge() -> None:
    judger = composed(merge_fn=summed)

    def branches_seen(rollout_state: RolloutState, output: dict[str, Any]) -> RolloutState:
        rollout_state.reward = {"score": 0.0, "branches": sorted(output["branches"])}
        return rollout_state

    judger.postprocess = branches_seen  # type: ignore[method-assign]
    out = await judger.batch_judge([s for s in mixed() if isinstance(s.data_source, str)])
    assert [s.reward and s.reward["branches"] for s in out] == [["exact"], ["short"], ["exact"]]
    out = await judger.batch_judge(mixed())
    assert [s.reward and s.reward["branches"] for s in out] == [
        ["exact"],
        ["short"],
        ["exact", "short"],
        ["exact"],
    ]


async def test_a_composition_subclass_preprocess_runs_in_batch_judge() -> None:
    class OnlyExact(ComposedJudger):
        def preprocess(self, rollout_state: RolloutState) -> dict[str, Any]:
            return self._preprocess(rollout_state, ["exact"])  # every sample to one branch

    base = composed(merge_fn=summed)
    judger = OnlyExact(base.branches, merge_fn=summed)
    out = await judger.batch_judge(mixed())
    assert [s.reward for s in out] == [{"score": 1.0}, {"score": 0.0}, {"score": 1.0}, {"score": 0.0}]


@pytest.mark.parametrize("form", ["per sample", "list"])
async def test_a_merge_that_builds_new_states_gives_the_same_rewards_in_batch_and_alone(form: str) -> None:
    merge: Any = summed
    if form == "list":

        @batch_handler
        def merge(
            originals: list[RolloutState], judged: dict[str, list[dict[str, Any]]]
        ) -> list[RolloutState]:
            return [summed(s, {n: outs[i] for n, outs in judged.items()}) for i, s in enumerate(originals)]

    judger = composed(merge_fn=merge)
    batch = await judger.batch_judge(mixed())
    alone = [await judger.judge(s) for s in mixed()]
    assert [s.reward for s in batch] == [s.reward for s in alone]
    assert batch[2].reward == {"score": 2.0}  # "7" is exact and short


async def test_a_composition_judged_during_another_batch_merges_its_own_samples() -> None:
    inner = composed(merge_fn=batch_handler(lambda states, judged: [summed(s, {}) for s in states]))

    class AsksInner(Judger):
        async def judge_payload(self, payload: JudgerPayloadBatch) -> JudgerOutputBatch:
            items = payload if isinstance(payload, list) else [payload]
            judged = [await inner.judge(state(p["response"], {"exact": 1, "short": 1})) for p in items]
            out = [{"score": float(bool(s.reward))} for s in judged]  # 1.0: inner merged that sample
            return out if isinstance(payload, list) else out[0]

    outer = ComposedJudger(
        {"asks": AsksInner("asks"), "exact": composed().branches["exact"]},
        merge_fn=batch_handler(
            lambda states, judged: [tag(s, judged["asks"][i]) for i, s in enumerate(states)]
        ),
    )
    out = await outer.batch_judge([state("7", {"asks": 1, "exact": 1}), state("8", {"asks": 1, "exact": 1})])
    assert [s.reward for s in out] == [{"score": 1.0, "tagged": True}] * 2
