"""judger's presets as graders: one judger built once, every case through one ``batch_judge``."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from judger.core.rollout import RolloutState
from judger.judgers.config import JudgerConfig
from judger.testing.adversary.cases import FORMATS, Format, NearMiss

PRESET_FORMATS: dict[str, tuple[Format, ...]] = {
    "MathJudgerConfig": ("math",),
    "MathVerifyJudgerConfig": ("math",),
    # Geometry3K grades the last box (its <think> block weighs only in the format score)
    "GEO3KJudgerConfig": ("math",),
    "DapoMathJudgerConfig": ("dapo",),
    "GSM8KJudgerConfig": ("gsm8k",),
    "QAExactMatchJudgerConfig": ("qa",),
}
"""The answer formats each built-in preset reads (the cases of other formats are not its input)."""


def formats_read(config: JudgerConfig) -> tuple[Format, ...]:
    """The answer formats ``config``'s preset reads (every format for a config of your own)."""
    return PRESET_FORMATS.get(type(config).__name__, FORMATS)


def paid(reward: dict[str, Any] | None) -> bool:
    """A reward pays when its ``acc`` is True; a failed sample (no reward) pays nothing."""
    return reward is not None and reward.get("acc") is True


class PresetGrader:
    """A judger config as a grader: ``grade_many`` sends the cases, each with its prompt as the user
    turn, through one ``batch_judge`` of a judger built once. A sample that FAILED counts as not
    paid and is kept in ``failures`` (with its reason) for the caller to look at. ``formats``: the
    answer formats the preset reads (:data:`PRESET_FORMATS`).

    Sync: ``grade_many`` runs its own event loop; from async code await :meth:`grade_many_async`.
    """

    def __init__(self, config: JudgerConfig) -> None:
        self.config = config
        self.judger = config.build()
        self.formats = formats_read(config)
        self.failures: list[tuple[NearMiss, str]] = []

    def label(self, gold: str) -> Any:
        # search-R1's label is a dict of targets (verl's scorer refuses a bare string)
        return {"target": [gold]} if type(self.config).__name__ == "QAExactMatchJudgerConfig" else gold

    def __call__(self, prompt: str, response: str, gold: str) -> bool:
        return self.grade_many([NearMiss("", prompt, response, gold, False)])[0]

    def grade_many(self, cases: Sequence[NearMiss]) -> list[bool]:
        return asyncio.run(self.grade_many_async(cases))

    async def grade_many_async(self, cases: Sequence[NearMiss]) -> list[bool]:
        states = [
            RolloutState(
                message=[{"role": "user", "content": c.prompt}],
                response=c.response,
                reward_model={"ground_truth": self.label(c.gold)},
            )
            for c in cases
        ]
        judged = await self.judger.batch_judge(states)
        for case, state in zip(cases, judged):
            if state.reward is None:
                self.failures.append((case, str(state.error_msg)))
        return [paid(state.reward) for state in judged]
