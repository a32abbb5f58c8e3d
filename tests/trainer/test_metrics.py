"""judger.trainer.metrics against a plain loop written from verl's documented algorithm."""

from __future__ import annotations

import math
from collections import defaultdict
from functools import partial
from itertools import combinations
from typing import Any

import numpy as np
import pytest

from judger import RolloutState, Status
from judger.trainer.metrics import (
    bootstrap_sizes,
    compute_validation_metrics,
    flatten_metrics,
    pass_at_k,
    process_validation_metrics,
)

pytestmark = pytest.mark.py310

# --- the reference: verl's loop, one (uid, variable, k) at a time --------------------------------


def _bootstrap(data: list[Any], size: int, reduce_fns: list[Any], n_bootstrap: int, seed: int) -> list[tuple]:
    # verl seeds the global legacy generator here; RandomState(seed) is the same stream
    rng = np.random.RandomState(seed)
    lists: list[list[Any]] = [[] for _ in reduce_fns]
    for _ in range(n_bootstrap):
        picked = [data[i] for i in rng.choice(len(data), size=size, replace=True)]
        for i, fn in enumerate(reduce_fns):
            lists[i].append(fn(picked))
    return [(np.mean(lst), np.std(lst)) for lst in lists]


def _maj(data: list[dict[str, Any]]) -> Any:
    vote2vals: dict[Any, list[Any]] = defaultdict(list)
    for d in data:
        vote2vals[d["pred"]].append(d["val"])
    counts = {k: len(v) for k, v in vote2vals.items()}
    return vote2vals[max(counts, key=counts.get)][0]


def reference_metrics(data_sources, uids, infos, seed=42, n_bootstrap=1000, with_pass=True):
    grouped: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for i, ds in enumerate(data_sources):
        for var, vals in infos.items():
            grouped[ds][uids[i]][var].append(vals[i])
    # pass@k is for variables that are 0/1 over the whole batch (a -1/1 score is not)
    binary_vars = {
        var
        for var, vals in infos.items()
        if all(not isinstance(v, str) and float(v) in (0.0, 1.0) for v in vals if v is not None)
    }
    per_uid: dict = defaultdict(lambda: defaultdict(dict))
    for ds, uid2var in grouped.items():
        for var2vals in uid2var.values():
            preds = var2vals.get("pred")
            for var, all_vals in var2vals.items():
                vals = [v for v in all_vals if v is not None]
                if not vals or isinstance(vals[0], str):
                    continue
                # verl votes only when every sample of the uid has a prediction and a value
                has_pred = preds is not None and len(preds) == len(vals) and all(p is not None for p in preds)
                m: dict[str, Any] = {}
                n = len(vals)
                m[f"mean@{n}"] = np.mean(vals)
                if n > 1:
                    m[f"std@{n}"] = np.std(vals)
                    binary = var in binary_vars
                    for k in bootstrap_sizes(n):
                        (bm, bs), (wm, ws) = _bootstrap(vals, k, [np.max, np.min], n_bootstrap, seed)
                        m[f"best@{k}/mean"], m[f"best@{k}/std"] = bm, bs
                        m[f"worst@{k}/mean"], m[f"worst@{k}/std"] = wm, ws
                        if has_pred:
                            votes = [{"val": v, "pred": p} for v, p in zip(vals, preds)]
                            [(mm, ms)] = _bootstrap(votes, k, [partial(_maj)], n_bootstrap, seed)
                            m[f"maj@{k}/mean"], m[f"maj@{k}/std"] = mm, ms
                        if with_pass and binary:
                            c = int(sum(float(v) for v in vals))
                            # brute force over all k-subsets: the definition, not the formula
                            subsets = list(combinations(range(n), k))
                            hits = sum(any(float(vals[i]) == 1.0 for i in s) for s in subsets)
                            m[f"pass@{k}"] = hits / len(subsets)
                            assert c >= 0
                per_uid[ds][var].setdefault("_uids", []).append(m)
    out: dict = {}
    for ds, var2 in per_uid.items():
        for var, d in var2.items():
            collected: dict[str, list[float]] = defaultdict(list)
            for m in d["_uids"]:
                for name, v in m.items():
                    collected[name].append(v)
            out.setdefault(ds, {})[var] = {name: float(np.mean(v)) for name, v in collected.items()}
    return out


def _random_batch(rng: np.random.Generator, n_prompts: int, sizes: list[int], sources: list[str]):
    data_sources, uids, score, acc, pred, length = [], [], [], [], [], []
    for p in range(n_prompts):
        n = int(rng.choice(sizes))
        ds = sources[p % len(sources)]
        for _ in range(n):
            a = bool(rng.random() < 0.4)
            data_sources.append(ds)
            uids.append(f"{ds}-{p}")
            acc.append(a)
            score.append(1.0 if a else -1.0)
            # few distinct answers: votes tie often; now and then no prediction or no length
            pred.append(None if rng.random() < 0.03 else str(rng.integers(0, 3)))
            length.append(None if rng.random() < 0.05 else float(rng.integers(10, 500)))
    return data_sources, uids, {"score": score, "acc": acc, "pred": pred, "len": length}


# --- tests ----------------------------------------------------------------------------------------


def test_matches_verl_loop_bit_for_bit() -> None:
    rng = np.random.default_rng(7)
    ds, uids, infos = _random_batch(rng, 14, [1, 2, 3, 4, 5, 8], ["gsm8k", "math"])
    # interleave samples of different prompts: grouping must not depend on row order
    perm = rng.permutation(len(ds))
    ds = [ds[i] for i in perm]
    uids = [uids[i] for i in perm]
    infos = {k: [v[i] for i in perm] for k, v in infos.items()}
    expected = reference_metrics(ds, uids, infos, n_bootstrap=200)
    got = process_validation_metrics(ds, uids, infos, n_bootstrap=200)
    assert got.keys() == expected.keys()
    for source in expected:
        assert got[source].keys() == expected[source].keys()
        for var in expected[source]:
            assert got[source][var] == expected[source][var], (source, var)


def test_pass_at_k_can_be_left_out_for_verls_exact_metric_set() -> None:
    ds, uids, infos = ["a"] * 4, ["u"] * 4, {"acc": [True, False, False, False]}
    got = process_validation_metrics(ds, uids, infos, pass_k=False)
    assert not any(name.startswith("pass@") for name in got["a"]["acc"])
    assert got == {"a": {"acc": reference_metrics(ds, uids, infos, with_pass=False)["a"]["acc"]}}


def test_best_at_n_is_not_pass_at_n() -> None:
    got = process_validation_metrics(["a"] * 4, ["u"] * 4, {"acc": [1.0, 0.0, 0.0, 0.0]})["a"]["acc"]
    assert got["pass@4"] == 1.0
    assert 0.6 < got["best@4/mean"] < 0.75  # 1 - (3/4)^4 = 0.68: resampling with replacement
    assert got["pass@2"] == pytest.approx(0.5)


def test_pass_at_k_formula() -> None:
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(5, 3, 3) == 1.0
    assert pass_at_k(10, 1, 1) == pytest.approx(0.1)
    assert pass_at_k(10, 2, 5) == pytest.approx(1 - math.comb(8, 5) / math.comb(10, 5))
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)


def test_global_rng_untouched() -> None:
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    ds, uids, infos = _random_batch(np.random.default_rng(0), 5, [4], ["x"])
    process_validation_metrics(ds, uids, infos)
    after = np.random.get_state()[1]
    assert (before == after).all()


def test_local_stream_equals_verls_global_seeding() -> None:
    state = np.random.get_state()
    try:
        np.random.seed(42)
        verl = [np.random.choice(6, size=4, replace=True) for _ in range(50)]
    finally:
        np.random.set_state(state)
    local = np.random.RandomState(42).randint(0, 6, size=(50, 4))
    assert (np.stack(verl) == local).all()


def test_strings_and_missing_values() -> None:
    ds = ["a", "a", "a", "b"]
    uids = ["u", "u", "u", "v"]
    infos = {"score": [1.0, None, 0.0, 1.0], "note": ["x", "y", "z", "w"], "pred": ["1", "2", "1", None]}
    got = process_validation_metrics(ds, uids, infos)
    assert "note" not in got["a"] and "pred" not in got["a"]
    # the None sample is left out: uid u has two values of score
    assert got["a"]["score"]["mean@2"] == 0.5
    assert got["b"]["score"] == {"mean@1": 1.0}


def test_an_int_past_floats_range_is_missing_not_an_error() -> None:
    """A reward variable may hold any int (a count of digits, say); one that no float holds is a
    missing value, as NaN is, instead of an OverflowError for the whole batch or the variable lost
    for every other sample."""
    ds, uids = ["a"] * 4, ["u", "u", "v", "v"]
    huge = 10**400
    for digits, missing in (([3, huge, 1, 2], [3, None, 1, 2]), ([huge] * 4, [None] * 4)):
        score = [1.0, 0.0, 1.0, 1.0]
        got = process_validation_metrics(ds, uids, {"score": score, "digits": digits})
        assert got == process_validation_metrics(ds, uids, {"score": score, "digits": missing})
        assert got["a"]["score"]["mean@2"] == 0.75
    assert "digits" in process_validation_metrics(ds, uids, {"digits": [3, huge, 1, 2]})["a"]
    fits = process_validation_metrics(ds, uids, {"digits": [3, 10**20, 1, 2]})
    assert fits["a"]["digits"]["mean@2"] == pytest.approx((3 + 10**20 + 1 + 2) / 4)


def test_length_mismatch_is_an_error() -> None:
    with pytest.raises(ValueError, match="variable 'acc'"):
        process_validation_metrics(["a", "a"], ["u", "u"], {"acc": [1.0]})


def test_from_rollout_states_groups_by_prompt_and_skips_failed() -> None:
    def state(prompt: str, score: float | None, gid: Any = None) -> RolloutState:
        s = RolloutState(message=[{"role": "user", "content": prompt}], data_source="d", group_id=gid)
        if score is None:
            s.status = Status.FAILED
        else:
            s.reward = {"score": score, "acc": score > 0, "pred": str(score)}
        return s

    states = [state("p1", 1.0), state("p1", 0.0), state("p2", 0.0), state("p2", 0.0), state("p2", None)]
    got = compute_validation_metrics(states)["d"]
    assert got["acc"]["mean@2"] == 0.25  # p1: 0.5, p2: 0.0 (the failed sample is not a wrong answer)
    assert got["acc"]["pass@2"] == 0.5
    flat = flatten_metrics({"d": got})
    assert flat["val-core/d/acc/mean@2"] == 0.25
    assert "val-aux/d/score/mean@2" in flat and "val-aux/d/acc/std@2" in flat


def test_a_batch_of_many_prompts_is_the_mean_of_its_prompts() -> None:
    """The vectorised path over a batch of many prompts (its speed: bench/bench_metrics.py, in
    docs/benchmarks.md) gives each prompt's metrics as that prompt alone does: verl averages the
    per-prompt values, and seeds each prompt's bootstrap the same whatever the batch."""
    rng = np.random.default_rng(1)
    n_prompts, n = 64, 16
    ds = ["math"] * (n_prompts * n)
    uids = np.repeat(np.arange(n_prompts), n).tolist()
    acc = (rng.random(n_prompts * n) < 0.5).tolist()
    infos = {
        "score": [1.0 if a else 0.0 for a in acc],
        "acc": acc,
        "len": rng.integers(1, 1000, n_prompts * n).astype(float).tolist(),
        "pred": rng.integers(0, 4, n_prompts * n).astype(str).tolist(),
    }
    whole = process_validation_metrics(ds, uids, infos)["math"]
    assert set(whole) == {"score", "acc", "len"}  # pred is only voted on (maj@k)
    parts = []
    for p in range(n_prompts):
        one = slice(p * n, (p + 1) * n)
        parts.append(
            process_validation_metrics(ds[one], uids[one], {k: v[one] for k, v in infos.items()})["math"]
        )
    for var, metrics in whole.items():
        assert {"mean@16", "maj@16/mean", "best@16/mean"} <= set(metrics)
        for name, value in metrics.items():
            assert value == pytest.approx(np.mean([part[var][name] for part in parts]), rel=1e-12, abs=1e-12)


# --- shared work: patterns, distinct rows and equal variables computed once -------------


def test_many_prompts_with_few_patterns_match_verl_bit_for_bit() -> None:
    # 80 prompts of 4 samples, 0/1 values and two answers: far fewer agreement patterns and distinct
    # rows than groups, and ``acc`` equal to ``score``, so every shared path is taken
    rng = np.random.default_rng(3)
    ds, uids, score, acc, pred = [], [], [], [], []
    for p in range(80):
        for _ in range(4):
            right = bool(rng.random() < 0.6)
            ds.append("gsm8k" if p % 3 else "math")
            uids.append(f"u{p}")
            acc.append(right)
            score.append(1.0 if right else 0.0)
            pred.append("42" if right else str(rng.integers(0, 2)))
    infos: dict[str, list[Any]] = {"score": score, "acc": acc, "pred": pred}
    expected = reference_metrics(ds, uids, infos, n_bootstrap=100)
    got = process_validation_metrics(ds, uids, infos, n_bootstrap=100)
    assert got == expected
    assert list(got["gsm8k"]) == list(expected["gsm8k"]) == ["score", "acc"]
    assert got["gsm8k"]["acc"] == got["gsm8k"]["score"]


def test_majority_columns_shared_per_pattern_equal_per_group() -> None:
    from judger.trainer.metrics import _maj_columns, _maj_plan

    rng = np.random.default_rng(0)
    for _ in range(60):
        n = int(rng.integers(2, 13))
        k = int(rng.choice([2, 4, n]))
        codes = rng.integers(0, int(rng.integers(1, 4)), size=(int(rng.integers(1, 200)), n)) * 7
        idx = np.random.RandomState(42).randint(0, n, size=(50, k))
        columns, pattern_of = _maj_plan(codes, idx)
        assert np.array_equal(columns[pattern_of], _maj_columns(codes, idx))


def test_a_variable_that_differs_from_an_earlier_one_is_not_shared() -> None:
    ds = ["d"] * 8
    uids = ["a"] * 4 + ["b"] * 4
    score = [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0]
    other = [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0]
    got = process_validation_metrics(ds, uids, {"score": score, "other": other}, n_bootstrap=50)
    alone = process_validation_metrics(ds, uids, {"other": other}, n_bootstrap=50)
    assert got["d"]["other"] == alone["d"]["other"]
    assert got["d"]["other"]["mean@4"] != got["d"]["score"]["mean@4"]


def test_prompt_groups_from_messages_key_equal_messages_together() -> None:
    from judger.trainer.metrics import prompt_key

    def state(content: Any, order: str = "rc") -> RolloutState:
        message = {"role": "user", "content": content}
        if order == "cr":
            message = {"content": content, "role": "user"}
        return RolloutState(message=[message])

    assert prompt_key(state("q")) == prompt_key(state("q", "cr"))
    assert prompt_key(state("q")) != prompt_key(state("q2"))
    # a message of other keys, or of more, is its own prompt, whatever its key order
    assert prompt_key(state("q")) != prompt_key(RolloutState(message=[{"content": "q", "name": "user"}]))
    named = [{"role": "user", "content": "q", "name": "a"}]
    assert prompt_key(state("q")) != prompt_key(RolloutState(message=named))
    assert prompt_key(RolloutState(message=named)) == prompt_key(
        RolloutState(message=[{"name": "a", "content": "q", "role": "user"}])
    )
    # the key of a {role, content} message is that of any message: its sorted items
    assert prompt_key(state("q")) == ("prompt", ((("content", "q"), ("role", "user")),))
    # unhashable (multimodal) content still groups by its JSON text
    parts = [{"type": "text", "text": "q"}]
    assert prompt_key(state(parts)) == prompt_key(state([dict(parts[0])], "cr"))
    assert prompt_key(state(parts)) != prompt_key(state([{"type": "text", "text": "other"}]))


def test_unique_rows_groups_rows_of_equal_bytes_as_numpy_groups_equal_rows() -> None:
    from judger.trainer.metrics import unique_rows

    rng = np.random.default_rng(7)
    for matrix in (
        (rng.random((500, 8)) < 0.8).astype(np.float64),
        rng.integers(0, 3, size=(400, 6)),
        np.column_stack([rng.integers(0, 4, 300).astype(np.float64), rng.random((300, 2)).round(1)]),
    ):
        distinct, inverse = unique_rows(matrix)
        assert np.array_equal(distinct[inverse], matrix)
        expected = np.unique(matrix, axis=0)
        assert len(distinct) == len(expected)
        assert sorted(map(tuple, distinct.tolist())) == sorted(map(tuple, expected.tolist()))
    # equal in value, not in bytes: kept apart, each reconstructed exactly
    odd = np.array([[0.0, 1.0], [-0.0, 1.0], [np.nan, 1.0], [np.nan, 1.0]])
    distinct, inverse = unique_rows(odd)
    assert len(distinct) == 3 and inverse[2] == inverse[3] and inverse[0] != inverse[1]
    assert np.array_equal(distinct[inverse], odd, equal_nan=True)


def test_distinct_values_are_numpy_uniques_without_importing_numpy_ma() -> None:
    import subprocess
    import sys

    import numpy as np

    from judger.trainer.metrics import _distinct

    rng = np.random.default_rng(0)
    for _ in range(500):
        n = int(rng.integers(0, 12))
        floats = rng.choice([0.0, -0.0, 1.0, 0.5, np.nan, 2.0, -1.0], size=n)
        assert np.array_equal(_distinct(floats), np.unique(floats), equal_nan=True), floats
        ints = rng.integers(0, 5, size=n)
        assert np.array_equal(_distinct(ints), np.unique(ints))
    # the metrics of a whole run, in a fresh process: numpy.ma stays unloaded
    code = (
        "import sys; from judger.trainer.metrics import process_validation_metrics as p; "
        "p(['a'] * 6, [0, 0, 1, 1, 2, 2], "
        "{'score': [1.0, 0.0, 1.0, 1.0, 0.5, 0.0], 'pred': list('xyxxzy')}); "
        "print('numpy.ma' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
