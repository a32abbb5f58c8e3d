"""What a streamed scoring run keeps of each sample once its chunk is written: a small record.

``judger score`` reads, judges and writes a file in chunks; the report still needs every sample's
data_source, prompt group, reward and outcome (the @N metrics group samples across the whole
file). An :class:`Outcome` holds just those (no prompt, no response), and duck-types the fields
:func:`judger.cli.report.summarize` and :func:`judger.trainer.metrics.compute_validation_metrics`
read from a RolloutState.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from judger.cli.report import examples
from judger.core.rollout import RolloutState, Status
from judger.trainer.io import RowError
from judger.trainer.metrics import data_source_name, prompt_key


class Outcome:
    """The judged facts of one sample, without its text."""

    __slots__ = ("data_source", "error_msg", "extra_fields", "group_id", "reward", "status")
    message: Sequence[Any] = ()

    def __init__(self, state: RolloutState) -> None:
        self.data_source = data_source_name(state.data_source)
        key = prompt_key(state)
        if state.group_id is None:
            # a prompt-derived key holds the whole prompt: a digest groups the same and stays small
            key = hashlib.blake2b(repr(key).encode("utf-8", "surrogatepass"), digest_size=16).digest()
        self.group_id = key
        self.reward = state.reward
        self.status = state.status
        failure = state.extra_fields.get("judge_failure")
        self.extra_fields = {"judge_failure": failure} if failure is not None else {}
        self.error_msg = state.error_msg if state.status == Status.FAILED else None


class Tally:
    """Outcomes, bad rows and the first ``k`` examples per data_source, chunk after chunk."""

    def __init__(self, k: int = 0) -> None:
        self.outcomes: list[Outcome] = []
        self.errors: list[RowError] = []
        self.examples: list[dict[str, Any]] = []
        self.rows_read = 0
        self._k = k
        self._taken: dict[str, int] = {}

    def add(self, states: Sequence[RolloutState]) -> None:
        self.outcomes.extend(Outcome(s) for s in states)
        if self._k:
            for example in examples(states, self._k):
                name = example["data_source"]
                if self._taken.get(name, 0) < self._k:
                    self._taken[name] = self._taken.get(name, 0) + 1
                    self.examples.append(example)
