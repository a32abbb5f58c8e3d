"""Validation metrics over groups of samples: verl's ``process_validation_metrics``, vectorised.

For every data_source, prompt group (uid) and numeric variable, with ``n`` samples in the group:

- ``mean@n`` and (n > 1) ``std@n`` (population std);
- for ``k`` in ``[2, 4, 8, ... < n] + [n]``: ``best@k/mean``, ``best@k/std``, ``worst@k/mean``,
  ``worst@k/std`` from 1000 bootstrap resamples of size ``k`` drawn with replacement, and, when a
  ``pred`` variable exists, ``maj@k/mean`` and ``maj@k/std`` (majority vote on ``pred``, ties to the
  prediction seen first in the resample, valued as the first resampled sample with that prediction;
  only in uids where every sample has a prediction and a value of the variable, as verl does);
- ``pass@k`` for variables whose values are all 0/1: the unbiased estimator
  ``1 - C(n - c, k) / C(n, k)`` (``best@n`` resamples with replacement and is *not* pass@n).

Metrics are then averaged over the uids that have them. ``None`` values are left out, as verl
(0.9) does. Results equal verl's bit for bit for the same seed: verl re-seeds NumPy's legacy
generator before every (uid, variable, k) resample, so every group of size n draws the same index
matrix; it is drawn here once per (n, k) from a local
``np.random.RandomState(seed)`` (the same stream, without touching the global RNG) and applied to
all groups at once.
"""

from __future__ import annotations

import json
import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from numbers import Real
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy itself is imported where the metrics run: reading them costs nothing
    import numpy as np

from judger.core.outputs import float_or_nan
from judger.core.rollout import RolloutState

Metrics = dict[str, dict[str, dict[str, float]]]
"""``{data_source: {variable: {metric_name: value}}}``, as verl's function returns."""

N_BOOTSTRAP = 1000
# elements of one (groups x resamples x k) gather; bounds the scratch memory to a few tens of MB
_CHUNK_ELEMENTS = 1 << 22


def bootstrap_sizes(n: int) -> list[int]:
    """The resample sizes verl reports for a group of ``n``: powers of two below ``n``, then ``n``."""
    sizes = []
    k = 2
    while k < n:
        sizes.append(k)
        k *= 2
    sizes.append(n)
    return sizes


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k: the chance that ``k`` of ``n`` samples (``c`` correct) include a correct one."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def _is_number(value: Any) -> bool:
    if type(value) in (float, int, bool):
        return True
    import numpy as np

    return isinstance(value, (Real, np.number, np.bool_)) and not isinstance(value, str)


def _numeric(raw: Sequence[Any]) -> tuple[np.ndarray, np.ndarray] | None:
    """``(values as float64 with NaN where missing, present mask)``, or None if not a numeric variable."""
    import numpy as np

    try:
        fast = np.asarray(raw)
    except ValueError:  # ragged nested values
        fast = None
    if fast is not None and fast.ndim == 1 and fast.dtype.kind in "biuf" and len(fast):
        vals = fast.astype(np.float64)
        valid = ~np.isnan(vals) if fast.dtype.kind == "f" else np.ones(len(vals), dtype=bool)
        return (vals, valid) if valid.any() else None
    present = [v is not None for v in raw]
    if not any(present) or not all(_is_number(v) for v, p in zip(raw, present) if p):
        return None
    # missing: None, NaN (as on the fast path) and a number no float holds
    vals = np.array([float_or_nan(v) if p else np.nan for v, p in zip(raw, present)], dtype=np.float64)
    valid = ~np.isnan(vals)
    return (vals, valid) if valid.any() else None


def _hashable(value: Any) -> Hashable:
    try:
        hash(value)
    except TypeError:
        return ("__unhashable__", repr(value))
    return value


@dataclass
class _Layout:
    """Where each group's samples are: per group size n, a (groups, n) matrix of sample indices."""

    by_size: dict[int, tuple[np.ndarray, np.ndarray]]  # n -> (group ids, sample index matrix)
    maj_cache: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


def _distinct(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` of a 1-D array (NaNs as one value, as it counts them). np.unique first
    asks whether its input is a masked array, which imports numpy.ma: 6 ms of a short
    ``judger score`` run's start."""
    import numpy as np

    ordered = np.sort(values)
    if ordered.size < 2:
        return ordered
    keep = ordered[1:] != ordered[:-1]
    if ordered.dtype.kind == "f":  # sorted last, and unequal to each other
        keep &= ~(np.isnan(ordered[1:]) & np.isnan(ordered[:-1]))
    return ordered[np.concatenate(([True], keep))]


def _layout(group_of: np.ndarray, valid: np.ndarray, n_groups: int) -> _Layout:
    import numpy as np

    samples = np.flatnonzero(valid)
    groups = group_of[samples]
    order = samples[np.argsort(groups, kind="stable")]  # keeps sample order within a group
    sizes = np.bincount(groups, minlength=n_groups)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    by_size: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for n in _distinct(sizes[sizes > 0]).tolist():
        gids = np.flatnonzero(sizes == n)
        matrix = order[starts[gids][:, None] + np.arange(n)]
        by_size[int(n)] = (gids, matrix)
    return _Layout(by_size)


def _chunks(n_rows: int, per_row: int) -> list[slice]:
    step = max(1, _CHUNK_ELEMENTS // max(1, per_row))
    return [slice(lo, min(n_rows, lo + step)) for lo in range(0, n_rows, step)]


def _maj_plan(codes: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_maj_columns`, computed once per agreement pattern: ``(columns of each pattern (P, B),
    pattern of each group (G,))``.

    The vote depends only on which samples of a group agree, not on what they predict. Relabelling
    each sample with the position of its group's first sample that agrees with it gives every group
    with the same pattern the same row; validation sets of many prompts with few distinct answers
    each (most RL sets) have far fewer patterns than groups. Kept in this form, not expanded to one
    row per group: (groups x resamples) integers would cost a gigabyte at 100k prompts.
    """
    import numpy as np

    first = (codes[:, :, None] == codes[:, None, :]).argmax(axis=2)  # (G, n)
    patterns, inverse = unique_rows(first)
    if len(patterns) * 2 > len(first):
        return _maj_columns(codes, idx), np.arange(len(codes))
    return _maj_columns(patterns, idx), np.asarray(inverse).reshape(-1)


def _maj_mean_std(
    group_vals: np.ndarray, plan: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and std over the resamples of each group's majority-voted value.

    They depend only on the group's agreement pattern and values: groups alike in both (0/1
    scores over few patterns: most groups of a large set) are computed once, with the same row
    reductions, so the same bits.
    """
    import numpy as np

    columns, pattern_of = plan
    keys = np.column_stack([pattern_of.astype(np.float64), group_vals])
    distinct, inverse = unique_rows(keys)
    if len(distinct) * 2 > len(keys):
        return _maj_mean_std_rows(group_vals, plan)
    rows = np.ascontiguousarray(distinct[:, 1:])
    mean, std = _maj_mean_std_rows(rows, (columns, distinct[:, 0].astype(np.intp)))
    row_of = np.asarray(inverse).reshape(-1)
    return mean[row_of], std[row_of]


def _maj_mean_std_rows(
    group_vals: np.ndarray, plan: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_maj_mean_std` row by row, a chunk of groups at a time (each row's reductions are the
    same whatever the chunk)."""
    import numpy as np

    columns, pattern_of = plan
    g, b = len(pattern_of), columns.shape[1]
    mean, std = np.empty(g), np.empty(g)
    for rows in _chunks(g, b):
        maj = np.take_along_axis(group_vals[rows], columns[pattern_of[rows]], axis=1)
        mean[rows] = maj.mean(axis=1)
        std[rows] = maj.std(axis=1)
    return mean, std


def _maj_columns(codes: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """For each group and resample, the column (sample of the group) whose value the majority vote takes.

    ``codes`` (groups, n) numbers each group's predictions; ``idx`` (B, k) is the resample. verl
    takes the top-count prediction, ties to the one seen first, and the value of its first sample in
    the resample. That sample is the one present in the resample whose prediction has the top count
    and which appears earliest, so each sample s gets the integer key
    ``(count * (k + 1) + (k - first position)) * n + s`` (absent samples a negative one) and the vote
    is the largest key; ``key % n`` gives the sample back. All keys of all groups come from one
    matrix product, laid out (B, n, groups) so that the max runs over whole contiguous rows.
    """
    import numpy as np

    g, n = codes.shape
    b, k = idx.shape
    if k * k <= 4 * n:
        return _maj_columns_small_k(codes, idx)
    hits = idx[:, :, None] == np.arange(n)  # (B, k, n): resample position j holds sample s
    multiplicity = hits.sum(axis=1)
    first = hits.argmax(axis=1)
    earliness = np.where(multiplicity > 0, k - first, -((k + 1) ** 2))
    # float32 holds these integer keys exactly while they stay below 2**24
    dtype = np.float32 if (k + 1) ** 2 * n * 2 < 2**24 else np.float64
    left = np.concatenate(
        [multiplicity * ((k + 1) * n), earliness * n, np.ones((b, 1), dtype=np.intp)], axis=1
    ).astype(dtype)  # (B, 2n + 1)
    out = np.empty((g, b), dtype=np.intp)
    for chunk in _chunks(g, b * n):
        c = codes[chunk]
        gc = c.shape[0]
        same = c[:, :, None] == c[:, None, :]  # (gc, t, s)
        right = np.concatenate(
            [
                same.transpose(1, 2, 0).reshape(n, n * gc),  # column s * gc + group
                np.repeat(np.eye(n, dtype=bool), gc, axis=1),
                np.repeat(np.arange(n), gc)[None, :],
            ]
        ).astype(dtype)
        keys = (left @ right).reshape(b, n, gc).max(axis=1)  # (B, gc)
        out[chunk] = np.mod(keys, n).astype(np.intp).T
    return out


def _maj_columns_small_k(codes: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """:func:`_maj_columns` for small resamples: count each position's prediction among the k positions.

    The first position with the top count holds the first-seen top prediction (verl's tie rule).
    """
    import numpy as np

    g = codes.shape[0]
    b, k = idx.shape
    out = np.empty((g, b), dtype=np.intp)
    rows = np.arange(b)[None, :]
    for chunk in _chunks(g, b * k * k):
        boot = codes[chunk][:, idx]  # (gc, B, k)
        counts = (boot[..., :, None] == boot[..., None, :]).sum(axis=-1, dtype=np.int16)
        out[chunk] = idx[rows, counts.argmax(axis=-1)]
    return out


def _best_worst(group_vals: np.ndarray, idx: np.ndarray, levels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Max and min of every resample ``idx`` (B, k) of every group's values ``group_vals`` (G, n).

    A variable with at most two distinct values (acc, a 0/1 or -1/1 score) needs no gather: a
    resample's best is the high value when it holds any high sample, which one AND of bit sets
    ("samples in the resample", "high samples of the group") tells.
    """
    import numpy as np

    g, n = group_vals.shape
    b, k = idx.shape
    if len(levels) <= 2 and n <= 64:
        lo, hi = float(levels[0]), float(levels[-1])
        # n <= 64 samples fit one uint64 bit set: "any high sample in the resample" is one AND per
        # (group, resample), with no float matrix product (and no BLAS threads spinning for it)
        weights = np.left_shift(np.uint64(1), np.arange(n, dtype=np.uint64))
        present = np.bitwise_or.reduce(weights[idx], axis=1)  # (B,)
        hi_bits = np.bitwise_or.reduce(np.where(group_vals == hi, weights, np.uint64(0)), axis=1)  # (G,)
        lo_bits = np.bitwise_or.reduce(np.where(group_vals == lo, weights, np.uint64(0)), axis=1)
        any_hi = (hi_bits[:, None] & present[None, :]) != 0  # (G, B)
        any_lo = (lo_bits[:, None] & present[None, :]) != 0
        return np.where(any_hi, hi, lo), np.where(any_lo, lo, hi)
    best = np.empty((g, b))
    worst = np.empty((g, b))
    for rows in _chunks(g, b * k):
        boot = group_vals[rows][:, idx]
        best[rows] = boot.max(axis=2)
        worst[rows] = boot.min(axis=2)
    return best, worst


def _distinct_rows(group_vals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(distinct rows, row of each group)``: groups with the same values share one resampling.

    Best and worst of a resample depend only on the group's values, and 0/1 variables over groups of
    eight have at most 256 distinct rows however many prompts there are. The row sums run over the
    same values in the same order, so the results are the same bits as row by row.
    """
    import numpy as np

    distinct, row_of = unique_rows(group_vals)
    if len(distinct) * 2 > len(group_vals):
        return group_vals, np.arange(len(group_vals))
    return distinct, row_of


def unique_rows(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(distinct rows, index of each row's in distinct)``, rows equal when their bytes are.

    What ``np.unique(matrix, axis=0, return_inverse=True)`` gives for the rows computed on here,
    at a tenth of its cost (it sorts field by field; this sorts each row as one byte string). Rows
    equal in value but not in bytes (``0.0`` and ``-0.0``) stay apart: each is computed for itself,
    with the same result bits.
    """
    import numpy as np

    rows = np.ascontiguousarray(matrix)
    as_bytes = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).reshape(-1)
    _, first, inverse = np.unique(as_bytes, return_index=True, return_inverse=True)
    return rows[first], np.asarray(inverse).reshape(-1)


def _pred_codes(preds: Sequence[Any]) -> np.ndarray:
    """One integer per sample, equal exactly when the predictions are equal (as dict keys)."""
    import numpy as np

    seen: dict[Hashable, int] = {}
    codes = np.empty(len(preds), dtype=np.intp)
    for i, pred in enumerate(preds):
        try:
            codes[i] = seen.setdefault(pred, len(seen))
        except TypeError:
            codes[i] = seen.setdefault(_hashable(pred), len(seen))
    return codes


class _Collector:
    """Per (data_source, variable, metric): per-group values, averaged over groups in uid order."""

    def __init__(self) -> None:
        self.parts: dict[tuple[int, str, str], list[tuple[np.ndarray, np.ndarray]]] = {}

    def add(
        self, ds_of_group: np.ndarray, gids: np.ndarray, var: str, metric: str, values: np.ndarray
    ) -> None:
        ds = ds_of_group[gids]
        for d in _distinct(ds).tolist():
            mask = ds == d
            self.parts.setdefault((int(d), var, metric), []).append((gids[mask], values[mask]))

    def alias(self, var: str, same_as: str) -> None:
        """``var`` gets every metric of ``same_as`` (a variable with the same values)."""
        for (d, name, metric), parts in list(self.parts.items()):
            if name == same_as:
                self.parts[(d, var, metric)] = parts

    def result(self, ds_names: list[str], var_order: list[str]) -> Metrics:
        import numpy as np

        out: Metrics = {}
        # verl lists metrics in the order it first meets them; sort keys the same way per variable
        for (d, var, metric), parts in sorted(
            self.parts.items(), key=lambda item: (item[0][0], var_order.index(item[0][1]))
        ):
            gids = np.concatenate([p[0] for p in parts])
            vals = np.concatenate([p[1] for p in parts])
            ordered = vals[np.argsort(gids, kind="stable")]
            out.setdefault(ds_names[d], {}).setdefault(var, {})[metric] = float(np.mean(ordered))
        return out


def _metric_order(n: int, has_pred: bool, binary: bool) -> list[str]:
    names = [f"mean@{n}"]
    if n > 1:
        names.append(f"std@{n}")
        for k in bootstrap_sizes(n):
            names += [f"best@{k}/mean", f"best@{k}/std", f"worst@{k}/mean", f"worst@{k}/std"]
            if has_pred:
                names += [f"maj@{k}/mean", f"maj@{k}/std"]
            if binary:
                names.append(f"pass@{k}")
    return names


def process_validation_metrics(
    data_sources: Sequence[Any],
    sample_uids: Sequence[Any],
    infos_dict: Mapping[str, Sequence[Any]],
    seed: int = 42,
    expected_acc_counts: Mapping[tuple[Any, Any], int] | None = None,
    *,
    n_bootstrap: int = N_BOOTSTRAP,
    pass_k: bool = True,
) -> Metrics:
    """verl 0.9.1's ``process_validation_metrics(data_sources, sample_uids, infos_dict, seed,
    expected_acc_counts)``, vectorised.

    ``expected_acc_counts`` (``{(data_source, uid): sessions expected}``, what verl's trainer passes)
    counts sessions that produced no sample as ``acc=0`` in data sources that report ``acc``, and adds
    ``acc_success_only`` over the samples that exist, as verl does.
    ``infos_dict`` maps a variable name to one value per sample. A variable is used when its values
    are numbers (bool counts as 0/1); ``None`` (or NaN) marks a sample without that value (it is left out of
    that variable's groups); a variable holding any other value (strings such as ``pred``) is skipped.
    ``pass_k=False`` leaves out the pass@k entries, giving exactly verl's metric set (verl-exact mode).
    """
    n_real = len(data_sources)
    if expected_acc_counts:
        data_sources, sample_uids, infos_dict = _pad_expected_acc(
            data_sources, sample_uids, infos_dict, expected_acc_counts
        )
    _check_lengths(len(data_sources), sample_uids, infos_dict)
    groups = _group(data_sources, sample_uids, n_real, infos_dict.get("pred"))
    grader = _Grader(groups, seed, n_bootstrap, pass_k)
    for var, raw in infos_dict.items():
        grader.variable(var, raw)
    metrics = grader.collector.result(groups.ds_names, grader.used_vars)
    _in_verl_order(metrics, groups.preds is not None)
    return metrics


def _check_lengths(
    n_samples: int, sample_uids: Sequence[Any], infos_dict: Mapping[str, Sequence[Any]]
) -> None:
    if len(sample_uids) != n_samples:
        raise ValueError(f"{len(sample_uids)} uids for {n_samples} data_sources")
    for name, values in infos_dict.items():
        if len(values) != n_samples:
            raise ValueError(f"variable {name!r} has {len(values)} values for {n_samples} samples")


@dataclass
class _Groups:
    """The (data_source, uid) groups of the samples, and who may vote in each."""

    group_of: np.ndarray  # the group of each sample
    ds_of_group: np.ndarray  # the data_source (index) of each group
    ds_names: list[str]
    n_groups: int
    group_sizes: np.ndarray  # samples per group, sessions padded for expected_acc_counts left out
    preds: Sequence[Any] | None
    all_preds: np.ndarray | None  # per group: every sample of it has a prediction


def _group(
    data_sources: Sequence[Any], sample_uids: Sequence[Any], n_real: int, preds: Sequence[Any] | None
) -> _Groups:
    import numpy as np

    ds_index: dict[Any, int] = {}
    group_index: dict[tuple[int, Any], int] = {}
    ds_of_group_list: list[int] = []
    group_of = np.empty(len(data_sources), dtype=np.intp)
    for i, (ds, uid) in enumerate(zip(data_sources, sample_uids)):
        try:
            d = ds_index.setdefault(ds, len(ds_index))
            key = (d, uid)
            g = group_index.get(key)
        except TypeError:  # unhashable data_source or uid
            d = ds_index.setdefault(_hashable(ds), len(ds_index))
            key = (d, _hashable(uid))
            g = group_index.get(key)
        if g is None:
            g = group_index[key] = len(group_index)
            ds_of_group_list.append(d)
        group_of[i] = g
    n_groups = len(group_index)
    # sessions added for expected_acc_counts are not samples: they neither count nor vote
    group_sizes = np.bincount(group_of[:n_real], minlength=n_groups)
    all_preds = None
    if preds is not None:
        # verl votes in a uid only when every sample of it has a prediction
        missing = np.fromiter((p is None for p in preds[:n_real]), dtype=bool, count=n_real)
        all_preds = np.bincount(group_of[:n_real], weights=missing, minlength=n_groups) == 0
    return _Groups(
        group_of=group_of,
        ds_of_group=np.asarray(ds_of_group_list, dtype=np.intp),
        ds_names=[str(ds) for ds in ds_index],
        n_groups=n_groups,
        group_sizes=group_sizes,
        preds=preds,
        all_preds=all_preds,
    )


class _Grader:
    """Every metric of every numeric variable, with what variables share cached across them."""

    def __init__(self, groups: _Groups, seed: int, n_bootstrap: int, pass_k: bool) -> None:
        self.groups = groups
        self.seed = seed
        self.n_bootstrap = n_bootstrap
        self.pass_k = pass_k
        self.collector = _Collector()
        self.used_vars: list[str] = []
        self.layouts: dict[bytes, _Layout] = {}
        self.indices: dict[tuple[int, int], np.ndarray] = {}
        self.done: dict[bytes, str] = {}
        self.pred_codes: np.ndarray | None = None

    def variable(self, var: str, raw: Sequence[Any]) -> None:
        import numpy as np

        parsed = _numeric(raw)
        if parsed is None:
            return
        vals, valid = parsed
        self.used_vars.append(var)
        # ``acc`` is usually ``score`` again (True/False for 1.0/0.0): every metric is a function of
        # the values, the groups and the predictions, so a variable equal to one done is not redone
        fingerprint = vals.tobytes() + valid.tobytes()
        same_as = self.done.get(fingerprint)
        if same_as is not None:
            self.collector.alias(var, same_as)
            return
        self.done[fingerprint] = var
        layout = self.layouts.get(valid.tobytes())
        if layout is None:
            layout = self.layouts[valid.tobytes()] = _layout(
                self.groups.group_of, valid, self.groups.n_groups
            )
        levels = _distinct(vals[valid])
        binary = bool(np.isin(levels, (0.0, 1.0)).all())
        for n, (gids, matrix) in layout.by_size.items():
            self._size(var, vals, layout, n, gids, matrix, levels, binary)

    def _add(self, gids: np.ndarray, var: str, metric: str, values: np.ndarray) -> None:
        self.collector.add(self.groups.ds_of_group, gids, var, metric, values)

    def _size(
        self,
        var: str,
        vals: np.ndarray,
        layout: _Layout,
        n: int,
        gids: np.ndarray,
        matrix: np.ndarray,
        levels: np.ndarray,
        binary: bool,
    ) -> None:
        """The metrics of ``var`` over the groups of ``n`` samples."""
        import numpy as np

        groups = self.groups
        group_vals = vals[matrix]  # (G, n)
        self._add(gids, var, f"mean@{n}", group_vals.mean(axis=1))
        if n == 1:
            return
        self._add(gids, var, f"std@{n}", group_vals.std(axis=1))
        correct = group_vals.sum(axis=1).round().astype(np.intp) if binary else None
        # ... and when the variable has a value for every sample of the uid
        voting = None
        if groups.all_preds is not None:
            voting = (groups.group_sizes[gids] == n) & groups.all_preds[gids]
        rows: tuple[np.ndarray, np.ndarray] | None = None
        for k in bootstrap_sizes(n):
            idx = self.indices.get((n, k))
            if idx is None:
                # one randint call draws the same stream as verl's n_bootstrap choice() calls
                idx = self.indices[(n, k)] = np.random.RandomState(self.seed).randint(
                    0, n, size=(self.n_bootstrap, k)
                )
            if rows is None:
                rows = _distinct_rows(group_vals)
            distinct, row_of = rows
            best, worst = _best_worst(distinct, idx, levels)
            self._add(gids, var, f"best@{k}/mean", best.mean(axis=1)[row_of])
            self._add(gids, var, f"best@{k}/std", best.std(axis=1)[row_of])
            self._add(gids, var, f"worst@{k}/mean", worst.mean(axis=1)[row_of])
            self._add(gids, var, f"worst@{k}/std", worst.std(axis=1)[row_of])
            if voting is not None and voting.any():
                self._majority(var, layout, n, k, idx, gids[voting], matrix[voting], group_vals[voting])
            if self.pass_k and correct is not None:
                table = np.array([pass_at_k(n, c, k) for c in range(n + 1)])
                self._add(gids, var, f"pass@{k}", table[correct])

    def _majority(
        self,
        var: str,
        layout: _Layout,
        n: int,
        k: int,
        idx: np.ndarray,
        gids: np.ndarray,
        matrix: np.ndarray,
        group_vals: np.ndarray,
    ) -> None:
        """maj@k of ``var`` over the voting groups of ``n`` samples."""
        plan = layout.maj_cache.get((n, k))
        if plan is None:
            if self.pred_codes is None:
                assert self.groups.preds is not None
                self.pred_codes = _pred_codes(self.groups.preds)
            plan = layout.maj_cache[(n, k)] = _maj_plan(self.pred_codes[matrix], idx)
        maj_mean, maj_std = _maj_mean_std(group_vals, plan)
        self._add(gids, var, f"maj@{k}/mean", maj_mean)
        self._add(gids, var, f"maj@{k}/std", maj_std)


def _in_verl_order(metrics: Metrics, has_pred: bool) -> None:
    """Present each variable's metrics in verl's order (mean, std, then per k best/worst/maj/pass)."""
    for var2metric in metrics.values():
        for var, metric2val in var2metric.items():
            sizes = sorted(
                {int(name.split("@")[1].split("/")[0]) for name in metric2val if name.startswith("mean@")}
            )
            order: list[str] = []
            for n in sizes:
                order += [m for m in _metric_order(n, has_pred, True) if m not in order]
            rank = {name: i for i, name in enumerate(order)}
            var2metric[var] = dict(sorted(metric2val.items(), key=lambda kv: rank.get(kv[0], len(rank))))


def _pad_expected_acc(
    data_sources: Sequence[Any],
    sample_uids: Sequence[Any],
    infos_dict: Mapping[str, Sequence[Any]],
    expected: Mapping[tuple[Any, Any], int],
) -> tuple[list[Any], list[Any], dict[str, list[Any]]]:
    """Append one ``acc=0`` session per missing one, and ``acc_success_only`` = the observed ``acc``."""
    n = len(data_sources)
    for name, values in infos_dict.items():
        if len(values) != n:
            raise ValueError(f"variable {name!r} has {len(values)} values for {n} samples")
    acc = infos_dict.get("acc")
    with_acc = {ds for ds, a in zip(data_sources, acc or ()) if a is not None}
    observed: dict[tuple[Any, Any], int] = {}
    for ds, uid, a in zip(data_sources, sample_uids, acc or ()):
        if a is not None:
            observed[(ds, uid)] = observed.get((ds, uid), 0) + 1
    extra = [
        key
        for key, count in expected.items()
        if key[0] in with_acc
        for _ in range(count - observed.get(key, 0))
    ]
    infos = {name: list(values) + [None] * len(extra) for name, values in infos_dict.items()}
    if with_acc:
        infos["acc_success_only"] = list(acc or ()) + [None] * len(extra)
        infos["acc"] = list(acc or ()) + [0.0] * len(extra)
    return (
        list(data_sources) + [k[0] for k in extra],
        list(sample_uids) + [k[1] for k in extra],
        infos,
    )


def data_source_name(data_source: Any) -> str:
    """A printable data_source: the str itself, or the branch names of a ``{branch: weight}`` dict."""
    if isinstance(data_source, str):
        return data_source
    if isinstance(data_source, dict):
        return "+".join(str(k) for k in data_source)
    return "<none>" if data_source is None else str(data_source)


def prompt_key(state: RolloutState) -> Any:
    """The prompt group of a state: its ``group_id``, else its prompt messages (same prompt, same group)."""
    if state.group_id is not None:
        return state.group_id
    try:
        # hashable messages (plain text chat) key by their items, at a tenth of a JSON dump's cost;
        # a {role, content} message's sorted items are written out, not sorted (most of the cost)
        key = tuple(
            [
                (("content", m["content"]), ("role", m["role"]))
                if len(m) == 2 and "content" in m and "role" in m
                else tuple(sorted(m.items()))
                for m in state.message
            ]
        )
        hash(key)
    except TypeError:  # multimodal content (lists), unorderable keys: the canonical JSON text
        return "prompt:" + json.dumps(state.message, sort_keys=True, default=str)
    return ("prompt", key)


def rollout_infos(states: Sequence[RolloutState]) -> tuple[list[str], list[Any], dict[str, list[Any]]]:
    """``(data_sources, uids, infos_dict)`` of the states that have a reward (failed ones are left out).

    The variables are the union of reward keys over the batch (a sample lacking a key gets None).
    """
    judged = [s for s in states if s.reward is not None]
    keys: dict[str, None] = {}
    for s in judged:
        keys.update(dict.fromkeys(s.reward or {}))
    infos = {key: [(s.reward or {}).get(key) for s in judged] for key in keys}
    return [data_source_name(s.data_source) for s in judged], [prompt_key(s) for s in judged], infos


def compute_validation_metrics(
    states: Sequence[RolloutState], seed: int = 42, *, pass_k: bool = True
) -> Metrics:
    """:func:`process_validation_metrics` over judged RolloutStates, grouped by data_source and prompt."""
    data_sources, uids, infos = rollout_infos(states)
    return process_validation_metrics(data_sources, uids, infos, seed, pass_k=pass_k)


def flatten_metrics(metrics: Metrics) -> dict[str, float]:
    """verl's logging names: ``val-core/<ds>/<var>/<metric>`` for the headline ones, ``val-aux/...`` else.

    Headline: the ``acc`` variable (``reward`` / ``score`` without one), its mean/maj/best at the
    largest n.
    """
    flat: dict[str, float] = {}
    for ds, var2metric in metrics.items():
        core = "acc" if "acc" in var2metric else ("reward" if "reward" in var2metric else "score")
        for var, metric2val in var2metric.items():
            n_max = max(int(name.split("@")[-1].split("/")[0]) for name in metric2val)
            for name, value in metric2val.items():
                headline = var == core and name.startswith(("mean", "maj", "best")) and f"@{n_max}" in name
                flat[f"{'val-core' if headline else 'val-aux'}/{ds}/{var}/{name}"] = value
    return flat
