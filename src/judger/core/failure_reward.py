"""The number a trainer gets for a sample the judger could not score.

verl, OpenRLHF and TRL need a number for every sample; judger marks a sample it cannot score FAILED,
and the trainer-facing layers turn that into a number here. The default, ``"lowest"``, is the
lowest score the judger gives that sample (:meth:`BaseJudger.lowest_score_for`; 0.0 where the
judger declares none): a failure a response can provoke -- a grader reply with no verdict, a check
that overruns, a scorer that raises -- must never pay more than a wrong answer, or a policy learns
to provoke it. A number the user gives is used as given, and if a judged sample ever scores below
what a failure of that sample gets, one warning says so and names the option that fixes it.
"""

from __future__ import annotations

import logging
import math
import threading
from typing import Any, Literal

from judger.core.judger import BaseJudger
from judger.core.rollout import RolloutState

logger = logging.getLogger(__name__)

LOWEST: Literal["lowest"] = "lowest"
FailureRewardSetting = float | Literal["lowest"]


def check_failure_reward(value: Any, option: str) -> FailureRewardSetting:
    """``value`` as a setting: ``"lowest"`` or a finite number; anything else raises naming ``option``."""
    if value == LOWEST:
        return LOWEST
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(
            f"{option} must be 'lowest' (the judger's lowest score for the sample) or a finite number, "
            f"got {value!r}: every trainer needs a number for a failed sample, and a NaN or None is "
            "dropped or crashes it"
        )
    return float(value)


class FailureReward:
    """A setting of :data:`FailureRewardSetting` applied for one judger.

    ``of(state)`` is the number for a FAILED sample; ``watch(state, score)`` is called with each
    judged sample's score and warns once when a failure of that sample would have paid more.
    """

    def __init__(self, setting: Any, judger: BaseJudger, option: str, log: logging.Logger = logger) -> None:
        self.setting = check_failure_reward(setting, option)
        self.judger = judger
        self.option = option
        self.log = log
        # per data_source: a composed judger's routes have floors of their own
        self._lowest_seen: dict[str, float] = {}
        self._warned = False
        self._lock = threading.Lock()

    def of(self, state: RolloutState) -> float:
        if self.setting != LOWEST:
            return float(self.setting)
        try:
            floor = self.judger.lowest_score_for(state)
        except Exception:  # a sample that cannot even be routed: no floor known
            floor = None
        return 0.0 if floor is None else float(floor)

    def watch(self, state: RolloutState, score: float) -> None:
        # only a new lowest score of its data_source can be below a failure's number: the check
        # costs a dict lookup per sample
        source = state.data_source if isinstance(state.data_source, str) else ""
        if self._warned or score >= self._lowest_seen.get(source, math.inf):
            return
        with self._lock:
            self._lowest_seen[source] = min(self._lowest_seen.get(source, math.inf), score)
        failure = self.of(state)
        if score < failure and not self._warned:
            self._warned = True
            self.log.warning(
                "judger %r scored a sample of data_source=%r %s, below the %s a failed sample gets "
                "(%s=%r): a response that makes the judger fail earns more than this one; set %s to "
                "%s or lower, or declare the judger's lowest_score on its config",
                self.judger.judger_name,
                state.data_source,
                score,
                failure,
                self.option,
                self.setting,
                self.option,
                score,
            )
