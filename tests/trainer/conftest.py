"""Fake policy servers (judger.testing.fake_openai) on 127.0.0.1 for the data-path tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from judger.testing.fake_openai import PolicyServer

POLICY = "/models/fake-policy"


@pytest.fixture
def policy() -> Iterator[PolicyServer]:
    served = PolicyServer(POLICY)
    yield served
    served.stop()


@pytest.fixture
def two_policies() -> Iterator[list[PolicyServer]]:
    served = [PolicyServer(POLICY), PolicyServer(POLICY)]
    yield served
    for s in served:
        s.stop()
