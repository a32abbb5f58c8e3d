"""InlineScorerJudger: the batch fast path for cheap, bounded scorers (GSM8K, QA exact match).

For a regex over a few hundred characters the scorer costs about a microsecond, so the generic
``preprocess -> run_payloads -> finish`` pipeline (a payload dict, a dedup key, a kwargs merge, an
output check and an awaitable check per sample) would cost several times the scoring itself.
``batch_judge`` here does the same work in one pass over the states: read the response and label,
score, store the output; a sample whose scorer raises fails alone (per ``on_error``). There is no
batch dedup on this path: hashing a response costs about as much as scoring it.

``fast_scorer(response, label) -> dict`` is the scorer with its options bound, for scorers that do
not read ``extra_info`` and always return a valid output (judger's own); without it the generic
``scorer(response, label, extra_info, **options)`` is called and its output checked. Single-sample
``judge`` and the payload methods (used by composed and remote judging) are the generic ones, so
results are identical on every path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from judger.base import Judger
from judger.outputs import check_output
from judger.presets.base import ScorerJudger
from judger.rollout import RolloutState

_YIELD_EVERY = 2048

FastScorer = Callable[[Any, Any], dict[str, Any]]


class InlineScorerJudger(ScorerJudger):
    """A :class:`ScorerJudger` with a single-pass ``batch_judge`` for inline scorers."""

    def __init__(self, *args: Any, fast_scorer: FastScorer | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fast_scorer = fast_scorer

    def _fast_path(self) -> bool:
        cls = type(self)
        return (
            self.execution == "inline"
            and cls.preprocess is ScorerJudger.preprocess
            and cls.postprocess is Judger.postprocess
        )

    async def batch_judge(self, rollout_states: list[RolloutState]) -> list[RolloutState]:
        if not self._fast_path():
            return await super().batch_judge(rollout_states)
        fast = self.fast_scorer
        scorer, options, name = self.scorer, self.options, self.judger_name
        set_reward = _set_reward
        for lo in range(0, len(rollout_states), _YIELD_EVERY):
            if lo:
                await asyncio.sleep(0)  # a 100k batch must not starve the event loop
            for state in rollout_states[lo : lo + _YIELD_EVERY]:
                try:
                    reward_model = state.reward_model
                    label = reward_model.get("ground_truth") if reward_model else None
                    if fast is not None:
                        set_reward(state, fast(state.response, label))
                    else:
                        extra = state.extra_fields.get("extra_info") or None
                        set_reward(state, check_output(scorer(state.response, label, extra, **options), name))
                except Exception as exc:
                    self.capture(state, exc)
        return rollout_states


def _set_reward_direct(state: RolloutState, reward: dict[str, Any]) -> None:
    # What pydantic's __setattr__ does for a plain field (RolloutState has no validate_assignment),
    # without its Python-level dispatch, which would cost more than scoring a GSM8K answer.
    state.__dict__["reward"] = reward
    state.__pydantic_fields_set__.add("reward")


def _set_reward_checked(state: RolloutState, reward: dict[str, Any]) -> None:
    state.reward = reward


_set_reward = (
    _set_reward_checked if RolloutState.model_config.get("validate_assignment") else _set_reward_direct
)
