"""process_validation_metrics takes what verl 0.9.1's trainer passes
(``expected_acc_counts=``) and has a verl-exact mode; tests/clients compares it with verl's own."""

from __future__ import annotations

import numpy as np
import pytest

from judger.trainer.metrics import process_validation_metrics

pytestmark = pytest.mark.py310


def test_expected_acc_counts_fill_missing_sessions_with_zero() -> None:
    data_sources = ["a", "a", "a", "b", "b"]
    uids = ["u1", "u1", "u2", "v1", "v1"]
    infos = {"acc": [1.0, 1.0, 1.0, None, None], "score": [1.0, 0.0, 1.0, 0.5, 0.5]}
    expected = {("a", "u1"): 4, ("a", "u2"): 1, ("b", "v1"): 3}
    out = process_validation_metrics(data_sources, uids, infos, 42, expected_acc_counts=expected)
    # u1: 2 observed of 4 expected -> acc [1, 1, 0, 0]; u2: [1] -> mean over uids of the mean@n
    assert out["a"]["acc"]["mean@4"] == 0.5 and out["a"]["acc"]["mean@1"] == 1.0
    assert out["a"]["acc_success_only"]["mean@2"] == 1.0
    assert out["a"]["score"]["mean@2"] == 0.5  # other variables keep the samples that exist
    assert "acc" not in out["b"] and "acc_success_only" not in out["b"]  # b reports no acc


def test_verl_exact_mode_has_no_pass_at_k() -> None:
    rng = np.random.default_rng(1)
    n = 16
    infos = {"acc": rng.integers(0, 2, n).astype(float).tolist()}
    default = process_validation_metrics(["d"] * n, [i % 2 for i in range(n)], infos)
    exact = process_validation_metrics(["d"] * n, [i % 2 for i in range(n)], infos, pass_k=False)
    assert any(k.startswith("pass@") for k in default["d"]["acc"])
    assert not any(k.startswith("pass@") for k in exact["d"]["acc"])
    assert {k: v for k, v in default["d"]["acc"].items() if not k.startswith("pass@")} == exact["d"]["acc"]
