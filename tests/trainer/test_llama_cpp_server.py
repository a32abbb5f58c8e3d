"""The data path against a server that behaves as llama.cpp's does (judger.testing.fake_openai.
LlamaCppFake): ``n`` ignored, no token ids, chat logprobs only with ``top_logprobs``, HTTP 500 on a
token-id prompt, any model name. A group still gets its n samples; a data path that cannot train on
the replies stops at the first one, saying why and how to fix it; what needs a tokenizer is refused
at build without one."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from judger.core.errors import GenerationError
from judger.core.rollout import RolloutState, Status
from judger.presets import GSM8KJudgerConfig
from judger.testing.fake_openai import LlamaCppFake, PolicyServer
from judger.trainer.agent_loop import SingleTurnAgentLoop, SingleTurnAgentLoopConfig
from judger.trainer.agent_loop_manager import AgentLoopManagerConfig
from judger.trainer.controller import RolloutControllerConfig
from judger.trainer.io import example_data
from judger.trainer.sample_params import SampleParams
from judger.trainer.sampler import SamplerConfig
from judger.trainer.task import TaskSpecConfig
from judger.trainer.token_ids import ResponseTokenizer
from judger.trainer.training import prepare_train_data

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

GSM8K = example_data("gsm8k_test.jsonl")


@pytest.fixture
def llama() -> Iterator[PolicyServer]:
    served = PolicyServer(fake=LlamaCppFake())
    yield served
    served.stop()


def group(n: int) -> list[RolloutState]:
    return [
        RolloutState(message=[{"role": "user", "content": "What is 6 x 7?"}], group_id=0) for _ in range(n)
    ]


async def test_a_server_that_ignores_n_still_gives_every_sample(
    llama: PolicyServer, caplog: pytest.LogCaptureFixture
) -> None:
    """It answered one choice: the rest of the group went as requests of one, each its own seed
    (one seed for all would give one sample n times), and the next groups go as requests of one."""
    params = SampleParams(temperature=1.0, seed=7, max_tokens=64)
    config = RolloutControllerConfig(base_urls=[llama.url], backoff_base=0.01)
    with caplog.at_level(logging.WARNING, logger="judger.trainer.controller"):
        async with config.build() as ctl:
            first = await ctl.generate_group(group(4), params)
            second = await ctl.generate_group(group(4), params)
    for states in (first, second):
        assert [s.status for s in states] == [Status.COMPLETED] * 4, [s.error_msg for s in states]
        assert all(s.response == "The answer is \\boxed{7}" for s in states)
    bodies = list(llama.fake.requests)
    assert [b["n"] for b in bodies] == [4, 1, 1, 1, 1, 1, 1, 1]
    assert sorted(b["seed"] for b in bodies[:4]) == [7, 8, 9, 10]
    assert sorted(b["seed"] for b in bodies[4:]) == [7, 8, 9, 10]
    said = [r.getMessage() for r in caplog.records if "ignores n" in r.getMessage()]
    assert len(said) == 1 and "1 choice(s) for n=4" in said[0]


async def test_chat_logprobs_come_back_from_a_server_that_needs_top_logprobs(llama: PolicyServer) -> None:
    config = RolloutControllerConfig(base_urls=[llama.url])
    async with config.build() as ctl:
        (state,) = await ctl.generate_group(group(1), SampleParams(max_tokens=64))
    assert state.status == Status.COMPLETED
    assert state.logprobs == [-0.01] * len(state.response or "")
    assert llama.fake.requests[-1]["top_logprobs"] == 0
    # no token ids: the counts the reply's usage gives are kept for the sample
    assert state.response_ids is None and state.extra_fields["usage"] == {
        "prompt_tokens": len("What is 6 x 7?"),
        "completion_tokens": len(state.response or ""),
    }


async def test_a_token_id_prompt_refused_by_a_text_only_server_says_so(llama: PolicyServer) -> None:
    config = RolloutControllerConfig(
        base_urls=[llama.url], endpoint="completions", max_retries=1, backoff_base=0.01
    )
    states = group(2)
    for state in states:
        state.prompt_ids = [87, 104, 97, 116]
    async with config.build() as ctl:
        await ctl.generate_group(states, SampleParams(max_tokens=8))
    for state in states:
        assert state.status == Status.FAILED and "HTTP 500" in (state.error_msg or "")
        assert "the prompt went as token ids" in (state.error_msg or ""), state.error_msg


def task(sampler: SamplerConfig, **loop: Any) -> TaskSpecConfig:
    return TaskSpecConfig(
        task_name="gsm8k",
        agent_loop_config=SingleTurnAgentLoopConfig(
            sample_params={"max_tokens": 64, "temperature": 1.0}, **loop
        ),
        judger_config=GSM8KJudgerConfig(),
        sampler_config=sampler,
    )


async def test_the_data_path_stops_at_the_first_reply_without_token_ids(llama: PolicyServer) -> None:
    """Before: every group was generated and judged, then prepare_train_data skipped them all as
    empty_response_ids (and the group of n=4 failed first: the server sent 1 choice)."""
    sampler = SamplerConfig(data_files=GSM8K, n=4, limit=50, shuffle=False)
    manager = AgentLoopManagerConfig(
        tasks=[task(sampler)], rollout_config=RolloutControllerConfig(base_urls=[llama.url])
    ).build()
    try:
        with pytest.raises(GenerationError) as caught:
            await manager.produce_batch(8)
    finally:
        await manager.aclose()
    message = str(caught.value)
    assert "returned no token ids" in message and "tokenize_responses=True" in message
    assert manager.groups_started == 1 and llama.fake.chat_requests == 4  # one group: 1 + 3 requests


class CharTokenizer:
    """A stand-in for the policy's local tokenizer (transformers is not in the main environment):
    one id per character, a ChatML-like template, EOS 3."""

    eos_token_id = 3
    chat_template = "chatml"

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
        return {"input_ids": [ord(c) for c in text]}

    def apply_chat_template(
        self, messages: Sequence[dict[str, Any]], add_generation_prompt: bool = True, tokenize: bool = True
    ) -> Any:
        text = "".join(f"<|{m['role']}|>{m['content']}\n" for m in messages) + "<|assistant|>"
        return self(text)["input_ids"] if tokenize else text


async def test_tokenize_responses_trains_on_a_server_without_token_ids(llama: PolicyServer) -> None:
    sampler = SamplerConfig(data_files=GSM8K, n=2, limit=4, shuffle=False)
    rollout = RolloutControllerConfig(base_urls=[llama.url], tokenize_responses=True)
    manager = AgentLoopManagerConfig(tasks=[task(sampler)], rollout_config=rollout).build(
        tokenizer=CharTokenizer()
    )
    try:
        batch = await manager.produce_batch(2)
    finally:
        await manager.aclose()
    for state in (s for g in batch for s in g):
        assert state.status == Status.COMPLETED and state.response
        assert state.response_ids == [ord(c) for c in state.response] + [3]  # ended on EOS
        assert state.logprobs is None  # the server's were for the tokens it sampled
    data = prepare_train_data(batch)
    assert len(data.samples) == 4 and not data.skipped


def test_what_needs_a_tokenizer_is_refused_at_build(llama: PolicyServer) -> None:
    sampler = SamplerConfig(data_files=GSM8K, n=2, limit=4)
    for rollout, words in (
        (RolloutControllerConfig(base_urls=[llama.url], endpoint="completions"), "endpoint='completions'"),
        (RolloutControllerConfig(base_urls=[llama.url], tokenize_responses=True), "tokenize_responses=True"),
    ):
        config = AgentLoopManagerConfig(
            tasks=[task(sampler, hf_checkpoint="/models/not-here")], rollout_config=rollout
        )
        with pytest.raises(ValueError, match=words) as caught:
            config.build()
        assert "hf_checkpoint='/models/not-here' gives no local tokenizer" in str(caught.value)
    with pytest.raises(ValueError, match="tokenize_responses needs the policy's tokenizer"):
        RolloutControllerConfig(base_urls=[llama.url], tokenize_responses=True).build()


def test_the_url_form_without_a_chat_template_is_refused(llama: PolicyServer) -> None:
    with pytest.raises(ValueError, match="under the policy's chat template, and no hf_checkpoint is set"):
        SingleTurnAgentLoop(SingleTurnAgentLoopConfig(), llama.url)


async def test_a_tokenizer_that_fails_fails_its_sample_only(llama: PolicyServer) -> None:
    class Broken(CharTokenizer):
        def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
            if "boxed" in text:
                raise ValueError("cannot read this")
            return super().__call__(text, add_special_tokens)

    rollout = RolloutControllerConfig(base_urls=[llama.url], tokenize_responses=True)
    ctl = rollout.build(tokenize_response=ResponseTokenizer(Broken()))
    async with ctl:
        states = await ctl.generate_group(group(2), SampleParams(max_tokens=64))
    for state in states:
        assert state.status == Status.FAILED and "the local tokenizer failed: ValueError" in (
            state.error_msg or ""
        )
