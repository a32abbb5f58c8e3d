"""verl's naive reward manager (``verl.workers.reward_manager.naive``) over a judger."""

from __future__ import annotations

from judger.compat.verl.managers.base import RewardManager


class NaiveRewardManager(RewardManager):
    """verl's naive manager: every row as it is, its ``extra_info`` with the rollout's
    ``tool_extra_fields``, ``num_turns`` and ``rollout_reward_scores`` (verl's reward loop, verl's
    ``DataProto`` call, and torch-free batches)."""
