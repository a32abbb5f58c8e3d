"""judger as OpenRLHF 0.11.2's reward file: OpenRLHF's own ``SingleTurnAgentExecutor``
(``openrlhf/utils/agent.py``), given ``--reward.remote_url`` a ``.py`` path, loads ``reward_func``
from it and calls it for each generated sample; the sample then becomes an ``Experience`` whose
``rewards`` OpenRLHF moves with ``.to()``.

vLLM does not run here: the engine is a stand-in that answers ``generate`` with fixed tokens, as
vLLM's ``RequestOutput`` carries them. Everything after generation is OpenRLHF's code."""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import judger.compat.openrlhf as judger_openrlhf

pytest.importorskip("openrlhf")


class FixedEngine:
    """Answers every ``generate`` with the tokens of ``text`` and the tokenizer's end token."""

    def __init__(self, tokenizer: Any, text: str) -> None:
        self.ids = tokenizer(text=text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]

    async def generate(self, prompt_token_ids: list[int], params: Any, multi_modal_data: Any = None) -> Any:
        output = SimpleNamespace(token_ids=list(self.ids), finish_reason="stop", logprobs=None, text="")
        return SimpleNamespace(outputs=[output])


@pytest.fixture
def judger_config(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, byte_tokenizer_factory: Any
) -> Iterator[Path]:
    byte_tokenizer_factory(tmp_path / "tok")
    monkeypatch.setenv("JUDGER_CONFIG", "dapomath")  # lowest score -1: a failure must not pay 0
    monkeypatch.setenv("JUDGER_TOKENIZER", str(tmp_path / "tok"))
    yield tmp_path


def run_sample(reward_file: str, tokenizer: Any, prompt: str, completion: str, label: str) -> dict[str, Any]:
    """OpenRLHF's single-turn path for one prompt: its executor generates, decodes ``prompt + response``
    with the special tokens and calls the reward file (``agent.py`` 196-306)."""
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    executor = SingleTurnAgentExecutor(reward_file)
    params = SimpleNamespace(max_tokens=32, logprobs=None)
    return asyncio.run(
        executor.execute(prompt, label, params, 256, tokenizer, FixedEngine(tokenizer, completion))
    )


def experience_rewards(output: dict[str, Any]) -> Any:
    """What OpenRLHF makes of the reward (``samples_generator.py`` 250-305: ``torch.tensor([reward])``,
    None when there is none) and does with it next (``experience_maker.py`` 244: ``.to()``)."""
    import torch
    from openrlhf.trainer.ppo_utils.experience import Experience

    reward = output["reward"]
    experience = Experience(rewards=torch.tensor([reward]) if reward is not None else None)
    assert experience.rewards is not None, "OpenRLHF's step would crash on this sample"
    return experience.rewards.to(torch.promote_types(experience.rewards.dtype, torch.float32))


@pytest.mark.parametrize("how", ["judger's module file", "a one-line file"])
def test_openrlhf_loads_and_calls_the_reward_file(how: str, judger_config: Path, tokenizer: Any) -> None:
    if how == "a one-line file":
        path = judger_config / "reward.py"
        path.write_text("from judger.compat.openrlhf import reward_func  # noqa: F401\n")
        reward_file = str(path)
    else:
        reward_file = judger_openrlhf.__file__
    prompt = "user: What is 6 x 7?\nassistant: "
    right = run_sample(reward_file, tokenizer, prompt, "Answer: 42", "42")
    # the query OpenRLHF decoded ends in the end token's text: DAPO reads "42", not "42<eos>"
    assert right["reward"] == [1.0] and right["scores"] == [1.0]
    assert right["extra_logs"]["judge_failed"] == [0.0]
    wrong = run_sample(reward_file, tokenizer, prompt, "Answer: 41", "42")
    assert wrong["reward"] == [-1.0]
    assert experience_rewards(right).tolist() == [[1.0]]
    # every sample logs the same keys: OpenRLHF stacks them across the step
    assert sorted(right["extra_logs"]) == sorted(wrong["extra_logs"]) == ["acc", "judge_failed"]


def test_a_failed_sample_gets_a_number_and_never_crashes_the_step(
    judger_config: Path, tokenizer: Any
) -> None:
    reward_file = judger_openrlhf.__file__
    # "" is OpenRLHF's label for a prompt without one: no label, a failed sample, the lowest score
    failed = run_sample(reward_file, tokenizer, "user: Q\nassistant: ", "Answer: 42", "")
    assert failed["reward"] == [-1.0] and failed["extra_logs"]["judge_failed"] == [1.0]
    assert experience_rewards(failed).tolist() == [[-1.0]]
    assert all(math.isfinite(v[0]) for v in failed["extra_logs"].values())


def test_a_query_without_its_prompt_is_not_judged_with_the_prompt_in_it(tokenizer: Any) -> None:
    """OpenRLHF truncates a long prompt from the left (``agent.py`` 227-239): the decoded query then
    does not start with the prompt, and judging it whole would let the prompt's worked answer pass
    as the response's."""
    reward = judger_openrlhf.make_reward_func("dapomath", strip=("<eos>",))
    out = reward(["ample: Answer: 42\nassistant: no idea<eos>"], ["Example: Answer: 42\nassistant: "], ["42"])
    assert out["rewards"] == [-1.0] and out["extra_logs"]["judge_failed"] == [1.0]
    ok = reward(["Q\nassistant: Answer: 42<eos>"], ["Q\nassistant: "], ["42"])
    assert ok["rewards"] == [1.0]


def test_env_var_names_the_judger(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JUDGER_CONFIG", raising=False)
    with pytest.raises(Exception, match="JUDGER_CONFIG is not set"):
        judger_openrlhf.OpenRLHFReward()(["q a"], ["q"], ["a"])
    assert os.environ.get("JUDGER_CONFIG") is None
