"""Fixtures of the HTTP tests: fake OpenAI-compatible graders and judger servers on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from judger.rollout import RolloutState, Status
from judger.testing import serve_asgi
from judger.testing.fake_openai import FakeOpenAI


@pytest.fixture
def fake_grader() -> Iterator[tuple[FakeOpenAI, str]]:
    """One fake grader and its base URL."""
    fake = FakeOpenAI()
    with serve_asgi(fake.app, timeout_graceful_shutdown=1) as server:
        yield fake, server.url
        fake.release()


@pytest.fixture
def two_graders() -> Iterator[list[tuple[FakeOpenAI, str]]]:
    fakes = [FakeOpenAI(), FakeOpenAI()]
    with (
        serve_asgi(fakes[0].app, timeout_graceful_shutdown=1) as a,
        serve_asgi(fakes[1].app, timeout_graceful_shutdown=1) as b,
    ):
        yield [(fakes[0], a.url), (fakes[1], b.url)]
        for fake in fakes:
            fake.release()


@pytest.fixture
def make_state() -> Callable[..., RolloutState]:
    def make(
        response: str | None, label: Any, question: str = "What is 2 + 3?", status: Status = Status.COMPLETED
    ) -> RolloutState:
        return RolloutState(
            message=[{"role": "user", "content": question}],
            response=response,
            reward_model={"ground_truth": label},
            status=status,
        )

    return make
