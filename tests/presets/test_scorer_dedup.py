"""Dedup keys hold only what the scorer reads. verl rows carry ``extra_info`` (index,
sample number) that no math scorer reads; it used to be part of the key, so no two rows matched."""

from __future__ import annotations

from typing import Any

import pytest

from judger import GSM8KJudgerConfig, MathJudgerConfig, QAExactMatchJudgerConfig, RolloutState
from judger.trainer.io import example_data, read_rollouts

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]


def _verl_group(states: list[RolloutState], samples: int) -> list[RolloutState]:
    """Each state repeated ``samples`` times, as verl hands GRPO groups: same answer, own extra_info."""
    out = []
    for i, state in enumerate(states):
        for k in range(samples):
            copy = state.model_copy(deep=True)
            copy.extra_fields["extra_info"] = {"index": i, "sample": k, "split": "test"}
            out.append(copy)
    return out


async def test_math_rows_differing_only_in_extra_info_are_scored_once() -> None:
    rows = read_rollouts(example_data()).states[:12]
    states = _verl_group(rows, 5)
    judger = MathJudgerConfig(execution="inline").build_local()
    scored: list[int] = []
    score = judger._score

    async def counting(payloads: Any) -> list[Any]:
        scored.append(len(payloads))
        return await score(payloads)

    judger._score = counting  # type: ignore[method-assign]
    out = await judger.batch_judge(states)
    assert sum(scored) <= 12, scored  # was 60: every row its own key
    # no score changes: each copy scores as its row does alone
    alone = (
        await MathJudgerConfig(execution="inline")
        .build_local()
        .batch_judge([s.model_copy(deep=True) for s in rows])
    )
    assert [s.reward for s in out] == [a.reward for a in alone for _ in range(5)]
    assert len({id(s.reward) for s in out}) == len(out)  # each sample its own dict


@pytest.mark.parametrize("config", [GSM8KJudgerConfig(), MathJudgerConfig(), QAExactMatchJudgerConfig()])
def test_presets_declare_that_their_scorer_reads_no_extra_info(config: Any) -> None:
    judger = config.build_local()
    a = {"response": "x", "label": "1", "extra_info": {"index": 0}}
    b = {"response": "x", "label": "1", "extra_info": {"index": 1}}
    assert judger._dedup_key(a) == judger._dedup_key(b)
    assert judger._dedup_key(a) != judger._dedup_key({**a, "label": "2"})


def test_a_scorer_that_reads_extra_info_keeps_it_in_the_key() -> None:
    from judger import CodeJudgerConfig

    judger = CodeJudgerConfig().build_local()
    a = {"response": "x", "label": "t", "extra_info": {"tests": 1}}
    assert judger._dedup_key(a) != judger._dedup_key({**a, "extra_info": {"tests": 2}})
