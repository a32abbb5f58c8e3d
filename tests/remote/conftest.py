"""Fixtures for the Ray tests (the test judgers are in judger.testing.ray)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def resource_manager(ray_cluster: Any) -> Iterator[Any]:
    from judger import CPUResourceManager

    manager = CPUResourceManager.instance()
    before = manager.registrations()
    yield manager
    assert manager.registrations() == before, "a test left a resource registration behind"
