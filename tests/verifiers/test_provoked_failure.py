"""A response that makes the grader fail must earn no more than a wrong answer, through every
trainer protocol that needs a number for a failed sample.

The grader here restates the response's final answer before its verdict, as chain-of-thought
graders do. A response whose final answer is ``\\boxed{A}`` then puts a second verdict into the
reply ("... is \\boxed{A}; ... Final Judgment: B"), which CompassVerifierV2's parser rightly reads
as no single verdict: the sample is FAILED. Verdict B (wrong) scores -1; a failure used to score
the trainers' 0.0, so writing ``\\boxed{A}`` instead of a wrong answer paid +1. OpenRLHF's own
client and verl's manager interface are the callers.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from judger import CompassVerifierV2Config, RolloutState, Status
from judger.compat.trl import judger_reward
from judger.compat.verl.managers import NaiveRewardManager
from judger.compat.verl.reward_managers import RewardBatch
from judger.server.app import create_app
from judger.testing import serve_asgi
from judger.testing.fake_openai import FakeOpenAI

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

GOLD = "7"
RIGHT, WRONG, PROVOKING = "so \\boxed{7}", "so \\boxed{5}", "so \\boxed{A}"
RESPONSES = [RIGHT, WRONG, PROVOKING]


@pytest.fixture(scope="module")
def grader() -> Iterator[CompassVerifierV2Config]:
    fake = FakeOpenAI(reply_style="quote")
    with serve_asgi(fake.app) as server:
        # a chain-of-thought grader needs more than CompassVerifierV2's one verdict token
        yield CompassVerifierV2Config(hosts=[server.url], max_tokens=256)


def test_the_provoking_response_leaves_the_grader_without_a_verdict(grader: CompassVerifierV2Config) -> None:
    async def judge() -> list[RolloutState]:
        async with grader.build() as judger:
            states = [
                RolloutState(
                    message=[{"role": "user", "content": "What is 3 + 4?"}],
                    response=r,
                    reward_model={"ground_truth": GOLD},
                    status=Status.COMPLETED,
                )
                for r in RESPONSES
            ]
            return await judger.batch_judge(states)

    right, wrong, provoking = asyncio.run(judge())
    assert right.reward is not None and right.reward["score"] == 1.0
    assert wrong.reward is not None and wrong.reward["score"] == -1.0
    assert provoking.status is Status.FAILED and "verdict" in (provoking.error_msg or "")


def test_verl_manager_scores_the_failure_as_the_lowest_verdict(grader: CompassVerifierV2Config) -> None:
    batch = RewardBatch(
        data_sources=["grader"] * 3,
        responses=RESPONSES,
        ground_truths=[GOLD] * 3,
        valid_response_lengths=[4, 4, 4],
        response_length=4,
    )
    out = NaiveRewardManager(judger=grader)(batch, return_dict=True)
    assert out["reward_tensor"].sum(axis=1).tolist() == [1.0, -1.0, -1.0]
    assert out["reward_extra_info"]["judge_failure"] == [None, None, "error"]
    # a number the user chooses is used as given
    chosen = NaiveRewardManager(judger=grader, failure_score=-3.0)(batch, return_dict=True)
    assert chosen["reward_tensor"].sum(axis=1).tolist() == [1.0, -1.0, -3.0]


def _openrlhf_client() -> ModuleType:
    """OpenRLHF's own remote-reward client (copied unchanged beside the server tests)."""
    path = Path(__file__).parents[1] / "server" / "openrlhf_client.py"
    spec = importlib.util.spec_from_file_location("openrlhf_client_for_verifiers", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_openrlhf_client_gets_the_lowest_verdict(grader: CompassVerifierV2Config) -> None:
    openrlhf = _openrlhf_client()
    prompt = "Q: what is 3 + 4?\nA:"

    async def step(url: str) -> list[Any]:
        executor = openrlhf.SingleTurnAgentExecutor(url + "/get_reward")
        outputs = [
            await executor.reward_step(prompt, GOLD, f"{prompt} {r}", openrlhf.Tokenizer()) for r in RESPONSES
        ]
        return [openrlhf.experience_info(o) for o in outputs]

    with serve_asgi(create_app(grader)) as server:
        infos = asyncio.run(step(server.url))
    assert [info["reward"] for info in infos] == [[[1.0]], [[-1.0]], [[-1.0]]]
    assert [info["judge_failed"] for info in infos] == [[[0.0]], [[0.0]], [[1.0]]]


def test_trl_reward_gets_the_lowest_verdict_and_a_chosen_zero_is_flagged(
    grader: CompassVerifierV2Config, caplog: pytest.LogCaptureFixture
) -> None:
    def call(reward: Any) -> list[float]:
        out = reward(
            prompts=["What is 3 + 4?"] * 3,
            completions=RESPONSES,
            ground_truth=[GOLD] * 3,
        )
        return asyncio.run(out) if asyncio.iscoroutine(out) else out

    assert call(judger_reward(grader, failure_reward="lowest", log_metrics=False)) == [1.0, -1.0, -1.0]
    with caplog.at_level(logging.WARNING):
        assert call(judger_reward(grader, failure_reward=0.0, log_metrics=False)) == [1.0, -1.0, 0.0]
    # the user's 0.0 is honoured, and the log says what it pays for
    flagged = [r.getMessage() for r in caplog.records if "makes the judger fail" in r.getMessage()]
    assert len(flagged) == 1 and "failure_reward" in flagged[0] and "-1.0" in flagged[0]
