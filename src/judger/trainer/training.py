"""From judged groups to training samples: ``prepare_train_data`` and pluggable advantage estimators.

A group is the samples of one prompt. A group with any ABORTED / FILTERED / FAILED sample, or a
sample with no ``response_ids`` (an empty ``response`` with ids, such as an answer that is only
EOS, is kept), is skipped as a whole (its advantages would be computed against missing siblings)
and counted by reason. So is a group with a sample whose generated fields fail
:func:`judger.trainer.validation.sample_problem` (token ids that are not ints in the vocabulary,
logprobs not finite and <= 0 or not one per token, text that cannot be stored): that sample is
marked FAILED with the reason, and the group counted as ``invalid``. Every kept sample must then
have a numeric ``reward["score"]`` and, when given, a ``response_mask`` as long as
``response_ids``; anything else is a bug upstream and raises, naming the sample.

Layout of one sample (P prompt tokens, R response tokens), shifted for next-token prediction:
``input_ids = prompt_ids + response_ids[:-1]`` (P + R - 1 tokens); ``labels`` = -100 for the first
P - 1 positions, then each response token, or -100 where ``response_mask`` is 0; ``advantages``
= 0.0 over the prompt and where the mask is 0, the sample's advantage elsewhere.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from numbers import Real

import numpy as np

from judger.core.rollout import RolloutState, Status
from judger.trainer.validation import fail_invalid, sample_problem

logger = logging.getLogger(__name__)

IGNORE_INDEX = -100
EPS = 1e-8

AdvantageEstimator = Callable[[np.ndarray], np.ndarray]
"""Scores of one group (float64, shape (n,)) -> one advantage per sample, same shape."""


def grpo_advantages(scores: np.ndarray) -> np.ndarray:
    """GRPO: ``(r - mean) / (std + 1e-8)`` with the sample std (ddof=1, as XTuner and verl use).

    A group of one, or one whose scores are all equal, carries no signal: its advantages are 0.0
    (XTuner's unbiased std makes a group of one NaN).
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.size < 2:
        return np.zeros_like(scores)
    std = scores.std(ddof=1)
    if std == 0.0:
        return np.zeros_like(scores)
    return (scores - scores.mean()) / (std + EPS)


def mean_baseline_advantages(scores: np.ndarray) -> np.ndarray:
    """Dr. GRPO: ``r - mean`` (no division by the std, so easy and hard prompts weigh the same)."""
    scores = np.asarray(scores, dtype=np.float64)
    return scores - scores.mean() if scores.size > 1 else np.zeros_like(scores)


def rloo_advantages(scores: np.ndarray) -> np.ndarray:
    """RLOO: each sample against the mean of the others, ``n / (n - 1) * (r - mean)``."""
    scores = np.asarray(scores, dtype=np.float64)
    n = scores.size
    if n < 2:
        return np.zeros_like(scores)
    return (scores - scores.mean()) * (n / (n - 1))


ADVANTAGE_ESTIMATORS: dict[str, AdvantageEstimator] = {
    "grpo": grpo_advantages,
    "dr_grpo": mean_baseline_advantages,
    "rloo": rloo_advantages,
}


@dataclass
class TrainSample:
    """One sample ready for the trainer; ``state`` is the rollout it came from."""

    input_ids: list[int]
    labels: list[int]
    advantages: list[float]
    advantage: float
    rollout_logprobs: list[float] | None
    state: RolloutState


@dataclass
class TrainData:
    """What :func:`prepare_train_data` gives: the samples, and the groups left out by reason."""

    samples: list[TrainSample] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    num_groups: int = 0

    @property
    def num_skipped(self) -> int:
        return sum(self.skipped.values())


_SKIP_STATUS = {Status.ABORTED: "aborted", Status.FILTERED: "filtered", Status.FAILED: "failed"}


def skip_reason(group: Sequence[RolloutState]) -> str | None:
    """Why ``group`` cannot be trained on (the first reason found), or None when it can."""
    for state in group:
        reason = _SKIP_STATUS.get(state.status)
        if reason:
            return reason
    for state in group:
        # an answer that is only EOS has no text but one token, which is trained on like any other
        if not state.response_ids:
            return "empty_response_ids" if state.response else "empty_response"
    return None


def _name(state: RolloutState, g: int, i: int) -> str:
    ids = [
        f"{k}={v!r}"
        for k, v in (("rollout_id", state.rollout_id), ("group_id", state.group_id))
        if v is not None
    ]
    return f"sample {i} of group {g}" + (f" ({', '.join(ids)})" if ids else "")


def _score(state: RolloutState, where: str) -> float:
    if state.reward is None:
        raise ValueError(f"{where}: reward is None; judge it before preparing train data")
    if "score" not in state.reward:
        raise ValueError(f"{where}: reward has no 'score' (keys: {sorted(state.reward)})")
    score = state.reward["score"]
    if hasattr(score, "item") and not isinstance(score, (list, tuple, dict)):
        score = score.item()
    if isinstance(score, bool) or not isinstance(score, Real) or not math.isfinite(float(score)):
        raise ValueError(f"{where}: reward['score'] must be a finite number, got {score!r}")
    return float(score)


def _layout(state: RolloutState, advantage: float, where: str) -> TrainSample:
    prompt_ids = list(state.prompt_ids or [])
    response_ids = list(state.response_ids or [])
    if not prompt_ids:
        raise ValueError(f"{where}: prompt_ids is empty; it is needed to build input_ids")
    n = len(response_ids)
    if state.logprobs is not None and len(state.logprobs) != n:
        raise ValueError(f"{where}: {len(state.logprobs)} logprobs for {n} response_ids")
    mask = state.response_mask
    if mask is not None and len(mask) != n:
        raise ValueError(f"{where}: response_mask has {len(mask)} entries for {n} response_ids")
    keep = [True] * n if mask is None else [bool(m) for m in mask]
    prefix = len(prompt_ids) - 1
    labels = [IGNORE_INDEX] * prefix + [tok if k else IGNORE_INDEX for tok, k in zip(response_ids, keep)]
    advantages = [0.0] * prefix + [advantage if k else 0.0 for k in keep]
    logprobs = None
    if state.logprobs is not None:
        logprobs = [0.0] * prefix + [float(lp) if k else 0.0 for lp, k in zip(state.logprobs, keep)]
    return TrainSample(
        input_ids=prompt_ids + response_ids[:-1],
        labels=labels,
        advantages=advantages,
        advantage=advantage,
        rollout_logprobs=logprobs,
        state=state,
    )


def prepare_train_data(
    groups: Sequence[Sequence[RolloutState]],
    advantage_estimator: str | AdvantageEstimator = "grpo",
    *,
    vocab_size: int | None = None,
) -> TrainData:
    """Turn judged groups (one list of samples per prompt) into training samples.

    ``advantage_estimator`` is a name in :data:`ADVANTAGE_ESTIMATORS` (``"grpo"``, ``"dr_grpo"``,
    ``"rloo"``) or a function from a group's scores to its advantages. Skipped groups are counted in
    ``TrainData.skipped`` by reason and logged; malformed samples raise ValueError naming them.
    ``vocab_size`` bounds the token ids (None: below 2**31 - 1).
    """
    if isinstance(advantage_estimator, str):
        try:
            estimator = ADVANTAGE_ESTIMATORS[advantage_estimator]
        except KeyError:
            known = ", ".join(ADVANTAGE_ESTIMATORS)
            raise ValueError(f"unknown advantage_estimator {advantage_estimator!r}; known: {known}") from None
    else:
        estimator = advantage_estimator
    out = TrainData(num_groups=len(groups))
    skipped: Counter[str] = Counter()
    for g, group in enumerate(groups):
        if not group:
            skipped["empty_group"] += 1
            continue
        reason = skip_reason(group)
        if reason is not None:
            skipped[reason] += 1
            continue
        problems = [
            (i, s, p) for i, s in enumerate(group) if (p := sample_problem(s, vocab_size)) is not None
        ]
        if problems:
            for i, state, problem in problems:
                logger.warning("%s not trained on: %s", _name(state, g, i), problem)
                fail_invalid(state, problem)
            skipped["invalid"] += 1
            continue
        scores = np.array([_score(s, _name(s, g, i)) for i, s in enumerate(group)], dtype=np.float64)
        advantages = np.asarray(estimator(scores), dtype=np.float64)
        if advantages.shape != scores.shape:
            raise ValueError(
                f"advantage estimator returned shape {advantages.shape} for a group of {scores.size} scores"
            )
        if not np.isfinite(advantages).all():
            raise ValueError(
                f"advantage estimator returned non-finite advantages for group {g}: {advantages}"
            )
        for i, (state, adv) in enumerate(zip(group, advantages.tolist())):
            out.samples.append(_layout(state, adv, _name(state, g, i)))
    out.skipped = dict(skipped)
    if skipped:
        detail = ", ".join(f"{k}: {v}" for k, v in sorted(skipped.items()))
        logger.warning(
            "prepare_train_data skipped %d of %d groups (%s)", sum(skipped.values()), len(groups), detail
        )
    return out
