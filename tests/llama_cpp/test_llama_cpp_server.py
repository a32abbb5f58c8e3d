"""judger against llama.cpp's real server (see conftest.py): what the main suite checks against
``LlamaCppFake`` (tests/trainer/test_llama_cpp_server.py, tests/cli/test_eval_llama_cpp.py,
tests/verifiers/test_real_model_replies.py), here with the model's own replies."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from judger import CompassVerifierV2Config, RolloutState, Status
from judger.cli.main import main
from judger.core.errors import GenerationError
from judger.presets import GSM8KJudgerConfig
from judger.testing.grader_replies import check_readings, judge_recorded
from judger.testing.server_process import ServerProcess
from judger.trainer.agent_loop import SingleTurnAgentLoopConfig
from judger.trainer.agent_loop_manager import AgentLoopManagerConfig
from judger.trainer.controller import RolloutControllerConfig
from judger.trainer.io import example_data
from judger.trainer.sample_params import SampleParams
from judger.trainer.sampler import SamplerConfig
from judger.trainer.task import TaskSpecConfig
from judger.trainer.training import prepare_train_data
from judger.verifiers import LLMJudgerConfig

GSM8K = example_data("gsm8k_test.jsonl")
TIMEOUT = 600.0


def group(n: int) -> list[RolloutState]:
    return [RolloutState(message=[{"role": "user", "content": "What is 6 x 7?"}]) for _ in range(n)]


async def test_n_ignored_logprobs_with_top_logprobs_and_usage(llama_cpp: ServerProcess) -> None:
    params = SampleParams(temperature=1.0, seed=11, max_tokens=12)
    async with RolloutControllerConfig(base_urls=[llama_cpp.url], request_timeout=TIMEOUT).build() as ctl:
        states = await ctl.generate_group(group(3), params)
        assert ctl.ignores_n
    for state in states:
        assert state.status == Status.COMPLETED, state.error_msg
        assert state.response_ids is None and state.logprobs and all(lp <= 0 for lp in state.logprobs)
        usage = state.extra_fields["usage"]
        assert usage["prompt_tokens"] > 0 and 0 < usage["completion_tokens"] <= 12
    assert len({s.response for s in states}) > 1  # three seeds, not one sample three times


async def test_a_token_id_prompt_fails_saying_why(llama_cpp: ServerProcess) -> None:
    config = RolloutControllerConfig(base_urls=[llama_cpp.url], endpoint="completions", max_retries=0)
    (state,) = group(1)
    state.prompt_ids = [1, 4093, 198]
    async with config.build() as ctl:
        await ctl.generate_group([state], SampleParams(max_tokens=4))
    assert state.status == Status.FAILED and "HTTP 500" in (state.error_msg or "")
    assert "the prompt went as token ids" in (state.error_msg or "")


def test_eval_n_and_token_counts(
    llama_cpp: ServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "scored.jsonl"
    argv = ["eval", str(GSM8K), "--base-url", llama_cpp.url, "-n", "3", "--limit", "2", "--temperature", "1"]
    argv += ["--seed", "3", "--max-tokens", "16", "-o", str(out), "--format", "json", "--no-progress"]
    code = main([*argv, "--preset", "gsm8k", "--request-timeout", str(TIMEOUT)])
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code in (0, 3) and report["generation"]["failed_samples"] == 0, report
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 6
    assert all(r["prompt_tokens"] > 0 and 0 < r["response_tokens"] <= 16 for r in rows)


def manager(url: str, tokenizer: Any, **rollout: Any) -> Any:
    task = TaskSpecConfig(
        task_name="gsm8k",
        agent_loop_config=SingleTurnAgentLoopConfig(sample_params={"max_tokens": 12, "temperature": 1.0}),
        judger_config=GSM8KJudgerConfig(),
        sampler_config=SamplerConfig(data_files=GSM8K, n=2, limit=6, shuffle=False),
    )
    config = RolloutControllerConfig(base_urls=[url], request_timeout=TIMEOUT, **rollout)
    return AgentLoopManagerConfig(tasks=[task], rollout_config=config).build(tokenizer=tokenizer)


async def test_the_data_path_stops_at_the_first_reply_then_trains_with_tokenize_responses(
    llama_cpp: ServerProcess, smollm2_tokenizer: Any
) -> None:
    stopped = manager(llama_cpp.url, smollm2_tokenizer)
    try:
        with pytest.raises(GenerationError, match="returned no token ids"):
            await stopped.produce_batch(2)
    finally:
        await stopped.aclose()
    assert stopped.groups_started == 1
    trained = manager(llama_cpp.url, smollm2_tokenizer, tokenize_responses=True)
    try:
        batch = await trained.produce_batch(2)
    finally:
        await trained.aclose()
    for state in (s for g in batch for s in g):
        assert state.response_ids and state.logprobs is None
        assert smollm2_tokenizer.decode(state.response_ids, skip_special_tokens=True) == state.response
    assert len(prepare_train_data(batch).samples) == 4


ANSWERS = ("6 x 7 = \\boxed{42}", "6 x 7 = \\boxed{41}", "I do not know.")


def graded(make_state: Callable[..., RolloutState]) -> list[RolloutState]:
    return [make_state(answer, "42", "What is 6 x 7?") for answer in ANSWERS]


@pytest.mark.parametrize("max_tokens", [1, 32])
async def test_compass_reads_or_fails_every_reply(
    llama_cpp: ServerProcess, max_tokens: int, make_state: Callable[..., RolloutState]
) -> None:
    """At 32 tokens SmolLM2 on llama.cpp opens with "A:" and explains: read as A."""
    config = CompassVerifierV2Config(
        hosts=[llama_cpp.url], max_tokens=max_tokens, dedup=False, max_concurrency=1, request_timeout=TIMEOUT
    )
    judged, exchanged = await judge_recorded(config, graded(make_state))
    print([(s.status.value, s.reward or s.error_msg) for s in judged])
    check_readings(judged, exchanged)


async def test_the_generic_judge_reads_yes_or_no(
    llama_cpp: ServerProcess, make_state: Callable[..., RolloutState]
) -> None:
    config = LLMJudgerConfig(
        hosts=[llama_cpp.url],
        prompt_template="Question: {question}\nReference answer: {gold_answer}\nStudent answer: {response}\n"
        "Is the student's answer correct? Reply YES or NO.",
        verdict_pattern=r"(?i)^(YES|NO)\b",
        verdict_scores={"YES": 1.0, "NO": 0.0},
        max_tokens=16,
        dedup=False,
        max_concurrency=1,
        request_timeout=TIMEOUT,
    )
    judged, exchanged = await judge_recorded(config, graded(make_state))
    print([(s.status.value, s.reward or s.error_msg) for s in judged])
    check_readings(judged, exchanged, compass=False)
    for state, (_, reply) in zip(judged, exchanged):
        opening = re.match(r"(?i)(yes|no)\b", reply.strip())
        assert (state.reward is not None) == (opening is not None), (reply, state.error_msg)
        if opening is not None and state.reward is not None:
            assert state.reward["verdict"] == opening.group(1).upper()
