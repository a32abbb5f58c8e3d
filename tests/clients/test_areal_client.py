"""judger inside AReaL 1.0.4's own reward path: ``RLVRWorkflow._compute_rewards`` decodes the
completion with the policy's tokenizer and awaits ``AsyncRewardWrapper`` (a process pool, 15 s
timeout, 3 retries), which runs ``judger.compat.areal``'s function in its worker processes.

AReaL's workers are forked once per process and keep the environment they were forked with, so
``JUDGER_CONFIG`` and ``JUDGER_TOKENIZER`` are set before the first call, for the whole module;
other judgers come through ``make_reward_fn``, whose function pickles with its settings.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judger import JudgerConfig
from judger.compat.areal import AReaLReward, make_reward_fn

pytestmark = pytest.mark.skipif(importlib.util.find_spec("areal") is None, reason="AReaL is not installed")


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory, byte_tokenizer_factory: Any) -> Iterator[Path]:
    directory = tmp_path_factory.mktemp("policy_tokenizer")
    byte_tokenizer_factory(directory)
    saved = {k: os.environ.get(k) for k in ("JUDGER_CONFIG", "JUDGER_TOKENIZER")}
    os.environ["JUDGER_CONFIG"] = "math"
    os.environ["JUDGER_TOKENIZER"] = str(directory)
    yield directory
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="module")
def workflow(tokenizer_dir: Path, areal_logging: None) -> Iterator[Any]:
    from areal.api.cli_args import GenerationHyperparameters
    from areal.workflow.rlvr import RLVRWorkflow

    # the string form, as an AReaL config names it: AReaL imports it on the first episode
    yield RLVRWorkflow(
        reward_fn="judger.compat.areal.reward_fn",
        gconfig=GenerationHyperparameters(max_new_tokens=16),
        tokenizer=str(tokenizer_dir),
    )


def areal_reward(workflow: Any, completion: str, row: dict[str, Any], reward_fn: Any = None) -> float:
    """What AReaL does for one generated sample (``areal/workflow/rlvr.py`` 84-108, 143-145): import
    the reward function named by string into an ``AsyncRewardWrapper``, then ``_compute_rewards``
    with the engine's response (prompt and completion tokens, the stop token last)."""
    from areal.api import AsyncRewardWrapper
    from areal.api.io_struct import ModelResponse
    from areal.utils.dynamic_import import import_from_string

    tok = workflow.tokenizer
    if isinstance(workflow.reward_fn, str):
        workflow.reward_fn = import_from_string(workflow.reward_fn)
    workflow.async_reward_fn = AsyncRewardWrapper(reward_fn if reward_fn is not None else workflow.reward_fn)
    prompt_ids = tok.encode("What is 6 x 7?")
    resp = ModelResponse(input_tokens=prompt_ids, output_tokens=[*tok.encode(completion), tok.eos_token_id])
    return float(asyncio.run(workflow._compute_rewards(resp, tok.decode(prompt_ids), row)))


def test_areal_scores_through_its_process_pool(workflow: Any) -> None:
    row = {"messages": [{"role": "user", "content": "What is 6 x 7?"}], "answer": "42"}
    assert areal_reward(workflow, "so \\boxed{42}", row) == 1.0
    assert areal_reward(workflow, "so \\boxed{41}", row) == 0.0
    # AReaL's completion still ends in the stop token's text, read off the tokenizer's directory
    assert (
        workflow.tokenizer.decode([*workflow.tokenizer.encode("x"), workflow.tokenizer.eos_token_id])
        == "x<eos>"
    )


def test_special_token_text_is_removed_not_cut_at(workflow: Any, tokenizer_dir: Path) -> None:
    row = {"messages": [], "answer": "42"}
    # DAPO reads the last "Answer:" line: with the stop token's text left on, "42<eos>" is no answer
    dapo = make_reward_fn("dapomath")
    assert areal_reward(workflow, "Answer: 42", row, dapo) == 1.0
    assert areal_reward(workflow, "Answer: 42", row, make_reward_fn("dapomath", strip=())) == -1.0
    # the policy writes the stop token's text mid-way, then a second answer: removing the text never
    # cuts the response there, so the grader still sees (and scores) the final answer
    assert areal_reward(workflow, "\\boxed{42}<eos> wait, \\boxed{41}", row) == 0.0
    assert areal_reward(workflow, "\\boxed{41}<eos> wait, \\boxed{42}", row) == 1.0


def test_a_failed_sample_gets_the_lowest_score_not_an_exception(workflow: Any) -> None:
    dapo = make_reward_fn("dapomath")  # DAPO's lowest score is -1: a failure never pays more
    # no label column: AReaL passes the row as keywords; the sample fails with the reason logged
    assert areal_reward(workflow, "Answer: 42", {"messages": []}, dapo) == -1.0
    assert areal_reward(workflow, "Answer: 42", {"messages": [], "answer": None}, dapo) == -1.0
    assert (
        areal_reward(
            workflow, "Answer: 42", {"solution": "42"}, make_reward_fn("dapomath", label_key="solution")
        )
        == 1.0
    )


def test_a_slow_sample_ends_at_the_adapters_deadline_not_areals_timeout(workflow: Any) -> None:
    """AReaL gives a reward 15 s, retries 3 times and then scores 0; judger's own deadline ends
    a slow sample before that, with the failure reward, on the first try."""
    slow = JudgerConfig(judger_name="slow", reward_handler="judger.testing.handlers:sleepy", timeout=60)
    fn = AReaLReward(slow, failure_reward=-1.0, deadline=2.0)
    started = time.monotonic()
    assert areal_reward(workflow, "42", {"answer": "42", "extra_info": {"sleep": 30}}, fn) == -1.0
    assert time.monotonic() - started < 14
    with pytest.raises(ValueError, match="AReaL's reward timeout"):
        AReaLReward("math", deadline=20)
