"""One verl manager family: one class per manager, one spelling, whatever path imports it."""

from __future__ import annotations

import importlib
import warnings
from typing import Any

import numpy as np
import pytest

from judger.compat.verl import managers, reward_managers

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

# every name a user could import a verl manager by, today or in an earlier release
NAMES = ("NaiveRewardManager", "BatchRewardManager", "DAPORewardManager", "DapoRewardManager")
MODULES = (
    "judger",
    "judger.compat.verl",
    "judger.compat.verl.managers",
    "judger.compat.verl.reward_managers",
)


def public_managers() -> dict[str, set[int]]:
    """``{casefolded name: ids of the objects served under it}`` across judger's public modules."""
    found: dict[str, set[int]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for module_name in MODULES:
            module = importlib.import_module(module_name)
            for name in NAMES:
                obj = getattr(module, name, None)
                if obj is not None:
                    found.setdefault(name.casefold(), set()).add(id(obj))
    return found


def test_each_manager_name_means_one_class_across_the_public_api() -> None:
    found = public_managers()
    assert set(found) == {"naiverewardmanager", "batchrewardmanager", "daporewardmanager"}
    assert all(len(ids) == 1 for ids in found.values()), "two classes answer to one manager name"


def test_the_core_module_holds_no_manager_of_its_own() -> None:
    assert not [n for n in vars(reward_managers) if n.endswith("RewardManager")]
    with pytest.raises(AttributeError):
        reward_managers.DAPORewardManager  # noqa: B018 - verl's spelling lives in managers only


def test_the_family_scores_a_torch_free_batch_on_the_core() -> None:
    def score(data_source: str, solution_str: str, ground_truth: str, extra_info: Any = None) -> float:
        return float(solution_str == ground_truth)

    batch = reward_managers.RewardBatch(
        data_sources=["a", "a"], responses=["7", "8"], ground_truths=["7", "7"], valid_response_lengths=[2, 1]
    )
    for cls in (managers.NaiveRewardManager, managers.BatchRewardManager, managers.DAPORewardManager):
        tensor = cls(compute_score=score)(batch)
        expected = reward_managers.reward_array(np.array([2, 1]), [1.0, 0.0], 2)
        assert isinstance(tensor, np.ndarray) and (tensor == expected).all(), cls.__name__
