"""The validation metrics of a run with one sample per prompt group, without NumPy.

With one sample per (data_source, uid), :func:`judger.trainer.metrics.process_validation_metrics`
reports ``mean@1`` alone: per data_source and numeric variable, the mean of the values present.
``judger score`` on a plain dataset file (GSM8K, one response per prompt) is that case; computing it
here spares the command NumPy's import, a large share of its start-up.

Only inputs whose result is provably the same to the bit are taken: values that are whole numbers
small enough for every order of summation to be exact (0/1 scores, booleans, counts). Anything else
(fractional scores, a value type NumPy might read otherwise) answers None, and the caller runs the
full metrics.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from judger.core.outputs import fits_float

Metrics = dict[str, dict[str, dict[str, float]]]

_EXACT = 2.0**53  # below this, every partial sum of whole numbers is exact in float64


def mean_at_1(
    data_sources: Sequence[Any], sample_uids: Sequence[Hashable], infos: Mapping[str, Sequence[Any]]
) -> Metrics | None:
    """``process_validation_metrics(data_sources, sample_uids, infos)`` when every group holds one
    sample and every variable is exact in any summation order; None otherwise.

    ``infos`` values are lists, or ``array("d")`` columns with NaN marking a missing value.
    """
    n = len(data_sources)
    if len(sample_uids) != n or any(len(values) != n for values in infos.values()):
        return None  # the full metrics say what is wrong
    try:
        if len(set(zip(data_sources, sample_uids))) != n:
            return None  # a group of several samples: std, best/worst, maj, pass@k
    except TypeError:  # unhashable data_source or uid
        return None
    ds_index: dict[Any, int] = {}
    for ds in data_sources:
        ds_index.setdefault(ds, len(ds_index))
    sums: dict[tuple[int, str], list[float]] = {}  # (data_source, variable) -> [sum, count]
    for var, raw in infos.items():
        values = _numbers(raw)
        if values is None:
            return None
        for ds, value in zip(data_sources, values or ()):
            if value is not None:
                running = sums.setdefault((ds_index[ds], var), [0.0, 0.0])
                running[0] += value
                running[1] += 1
    names = [str(ds) for ds in ds_index]
    order = list(infos)
    out: Metrics = {}
    for (d, var), (total, count) in sorted(sums.items(), key=lambda kv: (kv[0][0], order.index(kv[0][1]))):
        out.setdefault(names[d], {}).setdefault(var, {})["mean@1"] = total / count
    return out


def _numbers(raw: Sequence[Any]) -> list[float | None] | None:
    """The variable's values (None where missing), ``[]`` for a variable the metrics skip (it holds
    text), or None when only the full metrics can say."""
    if isinstance(raw, array):
        if raw.typecode != "d":
            return None
        values: list[float | None] = [None if math.isnan(v) else v for v in raw]
    else:
        if any(isinstance(v, str) for v in raw):
            return []  # text (``pred``): not a numeric variable
        if not all(v is None or type(v) in (float, bool) or (type(v) is int and fits_float(v)) for v in raw):
            return None  # a type NumPy may read as a number or not, or an int with no float
        values = [None if v is None else float(v) for v in raw]
        if any(v is not None and math.isnan(v) for v in values):
            return None  # NaN next to None: the full metrics decide which is missing
    present = [v for v in values if v is not None]
    if not present:
        return []  # no value at all: not reported
    if not all(v.is_integer() for v in present) or max(map(abs, present)) * len(present) >= _EXACT:
        return None
    return values
