"""What a streamed scoring run keeps of its samples once their chunk is written: columns of numbers.

``judger score`` reads, judges and writes a file in chunks; the report still needs every sample's
data_source, prompt group and reward values (the @N metrics group samples across the whole file).
Keeping a Python object per sample would do, but each would pin the allocator's pools of the chunk
it was made in: the process would then grow with the file however little it keeps. So a
:class:`Tally` keeps typed arrays (a code per data_source, a hash per prompt group, a float or a
value code per reward variable) plus counters per data_source, and builds the run's summary from
them: the one place it is built (:func:`summarize` is a tally of a list of states). A metric of the
report is a counter of :class:`_Source` and its line in :meth:`Tally.summary`.
"""

from __future__ import annotations

import json
import math
import sys
from array import array
from collections import Counter
from collections.abc import Hashable, Sequence
from numbers import Real
from typing import Any

from judger.cli.bad_rows import BadRows
from judger.cli.report import _at_n, examples, failure_kind, failure_reason, top_reasons_of
from judger.core.outputs import finite_number, float_or_nan
from judger.core.rollout import RolloutState, Status
from judger.trainer.mean_at_1 import mean_at_1
from judger.trainer.metrics import (
    Metrics,
    compute_validation_metrics,
    data_source_name,
    process_validation_metrics,
    prompt_key,
)
from judger.trainer.metrics import _is_number as metrics_is_number

_MISSING = -1
# the types array("d") takes as _is_number would (float() of each)
_FLOAT_TYPES = frozenset((float, int, bool))
# the types a chunk's score or acc values are summed at once for (an int may have no float)
_SUMMED_TYPES = frozenset((float, bool))


def _is_number(value: Any) -> bool:
    """:func:`judger.trainer.metrics._is_number`, without importing NumPy for a value that cannot be
    one of its scalars (no such value exists while NumPy is not loaded)."""
    if type(value) in (float, int, bool):
        return True
    if "numpy" not in sys.modules:
        return isinstance(value, Real) and not isinstance(value, str)
    return metrics_is_number(value)


def _group_hash(state: RolloutState) -> int:
    """The prompt group as a number: equal for equal :func:`prompt_key`, different otherwise (64
    bits: a collision among a million groups has odds of about one in 10**7)."""
    key: Hashable = prompt_key(state)
    try:
        return hash((type(key).__name__, key))
    except TypeError:
        return hash(json.dumps(key, sort_keys=True, default=str))


class _Column:
    """One reward variable over the judged samples: floats while every value is a number (NaN where
    missing), value codes from the first value that is not."""

    def __init__(self, filled: int) -> None:
        self.floats: array[float] | None = array("d", [math.nan]) * filled
        self.codes: array[int] | None = None
        self.values: list[Any] = []
        self._code_of: dict[Hashable, int] = {}

    def _code(self, value: Any) -> int:
        try:
            key: Hashable = value
            hash(key)
        except TypeError:
            key = ("__unhashable__", repr(value))
        code = self._code_of.get(key)
        if code is None:
            code = self._code_of[key] = len(self.values)
            self.values.append(value)
        return code

    def _to_codes(self) -> None:
        assert self.floats is not None
        self.codes = array("q", (_MISSING if math.isnan(v) else self._code(v) for v in self.floats))
        self.floats = None

    def append(self, value: Any) -> None:
        if self.floats is not None:
            if value is None:
                self.floats.append(math.nan)
                return
            if _is_number(value):
                self.floats.append(float_or_nan(value))  # a number no float holds: missing, as NaN
                return
            self._to_codes()
        assert self.codes is not None
        self.codes.append(_MISSING if value is None else self._code(value))

    def extend_values(self, values: list[Any]) -> None:
        """:meth:`append` each value; numbers all (the usual column) are copied in one step."""
        if self.floats is not None and _FLOAT_TYPES.issuperset(map(type, values)):
            before = len(self.floats)
            try:
                self.floats.extend(values)  # array("d") converts each as float() does
                return
            except OverflowError:  # an int past float's range: missing, one value at a time
                del self.floats[before:]
        for i, value in enumerate(values):
            if self.floats is None:  # value codes from here on
                self._extend_codes(values[i:])
                return
            self.append(value)

    def _extend_codes(self, values: list[Any]) -> None:
        assert self.codes is not None
        codes, code_of = self.codes, self._code_of.get
        for value in values:
            if value is None:
                codes.append(_MISSING)
                continue
            code = code_of(value) if type(value) is str else None  # text (``pred``): no hash check
            codes.append(self._code(value) if code is None else code)

    def extend(self, other: _Column | None, n: int) -> None:
        """Append ``other``'s ``n`` values; None: the other tally's samples never had this variable."""
        if other is None:
            if self.floats is not None:
                self.floats.extend(array("d", [math.nan]) * n)
            else:
                assert self.codes is not None
                self.codes.extend(array("q", [_MISSING]) * n)
            return
        if self.floats is not None and other.floats is not None:
            self.floats.extend(other.floats)
            return
        for value in other.column(as_array=False):
            self.append(None if type(value) is float and math.isnan(value) else value)

    def column(self, as_array: bool = True) -> Any:
        """The values: a float64 NumPy array (NaN where missing) while every value is a number
        (``array("d")`` with ``as_array=False``), else a list with None where missing."""
        if self.floats is not None:
            if not as_array:
                return self.floats
            import numpy as np  # only for the full metrics: a run of one sample per prompt skips them

            return np.frombuffer(self.floats, dtype=np.float64)
        assert self.codes is not None
        values = self.values
        return [None if c == _MISSING else values[c] for c in self.codes]


class _Source:
    """The counters of one data_source."""

    __slots__ = ("accs", "failed", "judged", "reasons", "samples", "scores", "skipped", "timed_out")

    def __init__(self) -> None:
        self.samples = self.judged = self.skipped = self.failed = self.timed_out = 0
        self.scores: list[float] = [0.0, 0.0]  # sum, count
        self.accs: list[float] = [0.0, 0.0]
        self.reasons: Counter[str] = Counter()

    def count_failure(self, kind: str, reason: str) -> None:
        if kind == "timeout":
            self.timed_out += 1
        else:
            self.failed += 1
        self.reasons[reason] += 1

    def merge(self, other: _Source) -> None:
        self.samples += other.samples
        self.judged += other.judged
        self.skipped += other.skipped
        self.failed += other.failed
        self.timed_out += other.timed_out
        for mine, theirs in ((self.scores, other.scores), (self.accs, other.accs)):
            mine[0] += theirs[0]
            mine[1] += theirs[1]
        self.reasons.update(other.reasons)

    def add_rewards(self, rewards: list[dict[str, Any]]) -> None:
        self.judged += len(rewards)
        for total, key in ((self.scores, "score"), (self.accs, "acc")):
            values: list[Any] = [reward.get(key) for reward in rewards]
            if _SUMMED_TYPES.issuperset(map(type, values)):
                chunk = sum(values)
                if chunk - chunk == 0.0:  # finite, so every value was (finite_number takes them all)
                    total[0] += chunk
                    total[1] += len(values)
                    continue
            for value in values:
                value = finite_number(value)
                if value is not None:
                    total[0] += value
                    total[1] += 1


class Tally:
    """Everything the report of a streamed run needs, added chunk by chunk."""

    def __init__(self, k: int = 0) -> None:
        self.errors = BadRows()  # the first rows' errors and the count: bounded, whatever the file
        self.examples: list[dict[str, Any]] = []
        self.samples = 0
        self._k = k
        self._taken: dict[str, int] = {}
        self._sources: dict[str, _Source] = {}
        self._source_codes: dict[str, int] = {}
        self._judged_source = array("i")
        self._judged_group = array("q")
        self._columns: dict[str, _Column] = {}

    def add(self, states: Sequence[RolloutState]) -> None:
        """Count a chunk of states. One pass reads each state's fields; the judged rewards then go
        into the columns a variable at a time (a call per sample would cost more than its reading)."""
        by_name: dict[str, tuple[_Source, int]] = {}  # a chunk holds a few data_source strings
        codes: list[int] = []
        groups: list[int] = []
        rewards: list[dict[str, Any]] = []
        of_source: dict[_Source, list[dict[str, Any]]] = {}
        failed = Status.FAILED
        for state in states:
            data_source = state.data_source
            entry = by_name.get(data_source) if type(data_source) is str else None
            if entry is None:
                entry = self._source_of(data_source)
                if type(data_source) is str:
                    by_name[data_source] = entry
            source, code = entry
            source.samples += 1
            kind = failure_kind(state) if state.status == failed else None
            if kind is not None:
                source.count_failure(kind, failure_reason(state))
            reward = state.reward
            if reward is None:
                if kind is None:
                    source.skipped += 1
                continue
            judged = of_source.get(source)
            if judged is None:
                judged = of_source[source] = []
            judged.append(reward)
            group = state.group_id
            # a str uid is its own prompt key: hashed here without the call
            groups.append(hash(("str", group)) if type(group) is str else _group_hash(state))
            codes.append(code)
            rewards.append(reward)
        self.samples += len(states)
        for source, judged in of_source.items():
            source.add_rewards(judged)
        self._add_judged(codes, groups, rewards)
        if self._k:
            self._take_examples(examples(states, self._k))

    def _take_examples(self, candidates: list[dict[str, Any]]) -> None:
        """Keep the candidates while their data_source has fewer than ``k`` examples."""
        for example in candidates:
            name = example["data_source"]
            if self._taken.get(name, 0) < self._k:
                self._taken[name] = self._taken.get(name, 0) + 1
                self.examples.append(example)

    def _source_of(self, data_source: Any) -> tuple[_Source, int]:
        """The counters of a data_source, and its code in the judged columns."""
        name = data_source_name(data_source)
        source = self._sources.get(name)
        if source is None:
            source = self._sources[name] = _Source()
            self._source_codes[name] = len(self._source_codes)
        return source, self._source_codes[name]

    def _add_judged(self, codes: list[int], groups: list[int], rewards: list[dict[str, Any]]) -> None:
        n = len(self._judged_source)
        self._judged_source.extend(codes)
        self._judged_group.extend(groups)
        columns = self._columns
        for reward in rewards:
            if not columns.keys() >= reward.keys():
                for key in reward:
                    if key not in columns:
                        columns[key] = _Column(n)  # missing (NaN) for the samples judged before
        for key, column in columns.items():
            column.extend_values([reward.get(key) for reward in rewards])

    def merge(self, other: Tally) -> None:
        """Add the samples ``other`` tallied, as if they had been added here after ours (a shard of
        the same file scored in another process; prompt groups hashed with the same hash secret)."""
        self.samples += other.samples
        self._take_examples(other.examples)
        codes = []
        for name, theirs in other._sources.items():  # their codes number their sources in order
            mine, code = self._source_of(name)
            mine.merge(theirs)
            codes.append(code)
        n, added = len(self._judged_source), len(other._judged_source)
        self._judged_source.extend(codes[c] for c in other._judged_source)
        self._judged_group.extend(other._judged_group)
        for key in other._columns:
            if key not in self._columns:
                self._columns[key] = _Column(n)
        for key, column in self._columns.items():
            column.extend(other._columns.get(key), added)

    def metrics(self) -> Metrics:
        """:func:`judger.trainer.metrics.compute_validation_metrics` of the samples added."""
        names = list(self._source_codes)
        data_sources = [names[c] for c in self._judged_source]
        # one sample per group, when no two group hashes are equal (the cheap test, on integers):
        # mean_at_1 then checks (data_source, group) pairs exactly
        if len(set(self._judged_group)) == len(self._judged_group):
            plain = {key: column.column(as_array=False) for key, column in self._columns.items()}
            at_1 = mean_at_1(data_sources, self._judged_group, plain)
            if at_1 is not None:
                return at_1
        infos = {key: column.column() for key, column in self._columns.items()}
        return process_validation_metrics(data_sources, list(self._judged_group), infos, 42)

    def summary(
        self, elapsed_s: float, metrics: Metrics | None = None, *, bad_rows: int | None = None
    ) -> dict[str, Any]:
        """The run's summary, per data_source: samples, judged, skipped, failed, timed_out,
        mean_score, accuracy, at_n, metrics, failure_reasons (the three most common, with counts).

        Failed samples (the judge raised or timed out) are counted, not scored: they are left out of
        the mean score, the accuracy and the @N metrics (a judge that failed is not a wrong answer).
        Skipped samples were not judged at all (rows whose status is not COMPLETED). ``bad_rows``:
        the unreadable input rows (default: those :attr:`errors` counted).
        """
        if metrics is None:
            metrics = self.metrics()
        sources: dict[str, Any] = {}
        for name, s in self._sources.items():
            var2metric = metrics.get(name, {})
            sources[name] = {
                "samples": s.samples,
                "judged": s.judged,
                "skipped": s.skipped,
                "failed": s.failed,
                "timed_out": s.timed_out,
                "mean_score": s.scores[0] / s.scores[1] if s.scores[1] else None,
                "accuracy": s.accs[0] / s.accs[1] if s.accs[1] else None,
                "at_n": _at_n(var2metric),
                "metrics": var2metric,
                "failure_reasons": top_reasons_of(s.reasons),
            }
        skipped = sum(v["skipped"] for v in sources.values())
        return {
            "samples": self.samples,
            "judged": sum(v["judged"] for v in sources.values()),
            "skipped": skipped,
            "failed": sum(v["failed"] for v in sources.values()),
            "timed_out": sum(v["timed_out"] for v in sources.values()),
            "bad_rows": len(self.errors) if bad_rows is None else bad_rows,
            "elapsed_s": round(elapsed_s, 3),
            "samples_per_s": round((self.samples - skipped) / elapsed_s, 1) if elapsed_s > 0 else None,
            "data_sources": sources,
        }


def summarize(
    states: Sequence[RolloutState],
    elapsed_s: float,
    metrics: Metrics | None = None,
    *,
    bad_rows: Sequence[Any] = (),
) -> dict[str, Any]:
    """:meth:`Tally.summary` of ``states`` (``metrics``: by default
    :func:`~judger.trainer.metrics.compute_validation_metrics` of them)."""
    tally = Tally()
    tally.add(states)
    if metrics is None:
        metrics = compute_validation_metrics(states)
    return tally.summary(elapsed_s, metrics, bad_rows=len(bad_rows))
