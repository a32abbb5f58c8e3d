"""CPUResourceManager: unique names, capacity checks against the cluster, rollback, and the embedded Ray."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from judger import CPUResourceManager, CPUResourcesConfig
from judger.remote.resources import ClusterCapacity, ray_cluster_capacity
from judger.testing.ray import SleepJudgerConfig

GIB = 1024**3


def capacity(
    cpus: float = 8, memory: float = 32 * GIB, pg_cpus: float = 0, pg_memory: float = 0
) -> ClusterCapacity:
    # two equal nodes
    return ClusterCapacity(cpus, memory, pg_cpus, pg_memory, cpus / 2, memory / 2)


def test_names_are_made_unique_and_released() -> None:
    manager = CPUResourceManager(lambda: capacity())
    cfg = CPUResourcesConfig(num_workers=1, num_cpus_per_worker=1)
    assert manager.register("judger", cfg) == "judger"
    assert manager.register("judger", cfg) == "judger#2"
    assert manager.register("judger", cfg) == "judger#3"
    assert manager.release("judger#2") and not manager.release("judger#2")
    assert manager.register("judger", cfg) == "judger#2"
    assert sorted(manager.registrations()) == ["judger", "judger#2", "judger#3"]


def test_total_cpus_are_checked_against_the_cluster_minus_placement_groups() -> None:
    manager = CPUResourceManager(lambda: capacity(cpus=8, pg_cpus=5))
    manager.register("a", CPUResourcesConfig(num_workers=2, num_cpus_per_worker=1))
    with pytest.raises(RuntimeError) as info:
        manager.register("b", CPUResourcesConfig(num_workers=2, num_cpus_per_worker=1))
    message = str(info.value)
    assert message.startswith("Insufficient CPU resources")
    assert "'b' asks for 2 worker(s) x 1 CPU" in message
    assert "need 4 CPUs" in message and "has 3 outside placement groups (8 total, 5 held" in message
    assert list(manager.registrations()) == ["a"]  # rolled back
    assert manager.register("b", CPUResourcesConfig(num_workers=1, num_cpus_per_worker=1)) == "b"


def test_one_worker_must_fit_the_largest_node() -> None:
    manager = CPUResourceManager(lambda: capacity(cpus=8))  # nodes of 4 CPUs
    with pytest.raises(RuntimeError, match="largest node has only 4 CPUs"):
        manager.register("big", CPUResourcesConfig(num_workers=1, num_cpus_per_worker=6))
    assert manager.registrations() == {}


def test_memory_is_checked_too() -> None:
    manager = CPUResourceManager(lambda: capacity(memory=8 * GIB, pg_memory=6 * GIB))
    with pytest.raises(RuntimeError) as info:
        manager.register("mem", CPUResourcesConfig(num_workers=3, num_cpus_per_worker=0.5))
    assert "Insufficient memory resources" in str(info.value)
    assert "need 3.00 GiB, but the cluster has 2.00 GiB outside placement groups" in str(info.value)
    assert manager.registrations() == {}


@pytest.mark.ray
def test_live_capacity_subtracts_placement_groups(ray_cluster: Any) -> None:
    import ray
    from ray.util import placement_group, remove_placement_group

    before = ray_cluster_capacity()
    assert before.total_cpus == ray.cluster_resources()["CPU"]
    group = placement_group([{"CPU": 0.5}])
    try:
        ray.get(group.ready(), timeout=30)
        held = ray_cluster_capacity()
        assert held.reserved_cpus == pytest.approx(before.reserved_cpus + 0.5)
        assert held.free_cpus == pytest.approx(before.free_cpus - 0.5)
    finally:
        remove_placement_group(group)


@pytest.mark.ray
def test_building_more_than_the_cluster_has_fails_fast_and_rolls_back(
    ray_cluster: Any, resource_manager: Any
) -> None:
    import ray

    cpus = ray.cluster_resources()["CPU"]
    cfg = SleepJudgerConfig(
        judger_name="too_big", cpu_resources=CPUResourcesConfig(num_workers=1000, num_cpus_per_worker=1)
    )
    with pytest.raises(RuntimeError) as info:
        cfg.build()
    message = str(info.value)
    assert "Insufficient CPU resources: 'judger:too_big' asks for 1000 worker(s) x 1 CPU" in message
    assert f"({cpus:g} total" in message
    assert "judger:too_big" not in resource_manager.registrations()


_EMBEDDED = textwrap.dedent(
    """
    import asyncio, os, ray
    from judger import JudgerConfig, CPUResourcesConfig, RemoteJudger, RolloutState
    cfg = JudgerConfig(judger_name="em", reward_handler="judger.testing.handlers:exact_match",
                       cpu_resources=CPUResourcesConfig(num_cpus_per_worker=0.5, cpu_memory_per_worker=2**26))
    assert not ray.is_initialized()
    with cfg.build() as judger:
        assert isinstance(judger, RemoteJudger)
        state = RolloutState(message=[], response="4", reward_model={"ground_truth": "4"})
        state = asyncio.run(judger.judge(state))
        address = ray.get_runtime_context().gcs_address
        print("judged:", ray.cluster_resources()["CPU"], os.cpu_count(), address, state.reward)
    """
)


def _judged(stdout: str) -> list[str]:
    """The fields of the script's own line: Ray forwards its workers' output to the same stdout
    from a thread of its own, so that line need not be the last."""
    (line,) = [line for line in stdout.splitlines() if line.startswith("judged: ")]
    return line[len("judged: ") :].split(" ", 3)


@pytest.mark.slow
def test_embedded_default_starts_a_local_ray_with_this_machines_cpus(tmp_path: Any) -> None:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.run(
        [sys.executable, "-c", _EMBEDDED], capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    cpus, count, _, reward = _judged(proc.stdout)
    assert float(cpus) == float(count)
    assert "'score': 1.0" in reward


@pytest.mark.slow
@pytest.mark.ray
def test_ray_address_joins_the_running_cluster(ray_cluster: Any, tmp_path: Any) -> None:
    address = ray_cluster.get_runtime_context().gcs_address
    env = {**os.environ, "RAY_ADDRESS": address}
    proc = subprocess.run(
        [sys.executable, "-c", _EMBEDDED], capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    _, _, joined, reward = _judged(proc.stdout)
    assert joined == address
    assert "'score': 1.0" in reward
