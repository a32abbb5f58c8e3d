"""verl's batch reward manager (``verl.workers.reward_manager.batch``) over a judger."""

from __future__ import annotations

from judger.compat.verl.managers.naive import NaiveRewardManager


class BatchRewardManager(NaiveRewardManager):
    """verl's batch manager: the whole batch in one judger call (a batch ``compute_score`` included)."""
