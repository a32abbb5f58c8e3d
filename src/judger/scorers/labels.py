"""The one error for a sample that has no ground truth: a broken sample, never a wrong answer."""

from __future__ import annotations


def missing_label(who: str) -> ValueError:
    """The error ``who`` (a scorer or judger) raises when the sample's ground truth is None."""
    return ValueError(f"{who}: the ground truth is None (reward_model.ground_truth missing?)")
