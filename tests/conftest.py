"""Shared fixtures: a real local Ray cluster, started once per test session when a test asks for it."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[object]:
    """A local Ray with this machine's CPUs (joined, not restarted, if one is already up)."""
    ray = pytest.importorskip("ray")
    started = False
    if not ray.is_initialized():
        os.environ.pop("RAY_ADDRESS", None)
        ray.init(
            num_cpus=max(2, os.cpu_count() or 2),
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
        started = True
    yield ray
    if started:
        ray.shutdown()
