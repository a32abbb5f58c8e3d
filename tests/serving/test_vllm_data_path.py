"""The data path and `judger eval` against a real vLLM server (see conftest.py).

Every row is compared with a raw replay of the same seeded request: the controller must keep
exactly what vLLM sampled (text, token ids, logprobs, finish_reason), and the sampling parameters
must reach the engine as its own request log prints them. Requests are few and short: the tier
runs on a 2-core machine.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import TIMEOUT, VLLMServer, eval_json, tokenizer_of
from judger.core.errors import GenerationError
from judger.core.rollout import RolloutState, Status
from judger.trainer.agent_loop import SingleTurnAgentLoop, SingleTurnAgentLoopConfig, render_messages
from judger.trainer.controller import RolloutControllerConfig, parse_choice
from judger.trainer.io import example_data
from judger.trainer.sample_params import SampleParams
from judger.trainer.sampler import SamplerConfig
from judger.trainer.training import prepare_train_data

GSM8K = example_data("gsm8k_test.jsonl")


def raw(server: VLLMServer, path: str, body: dict[str, Any]) -> dict[str, Any]:
    resp = httpx.post(server.url + path, json=body, timeout=TIMEOUT)
    assert resp.status_code == 200, resp.text
    return resp.json()


def logged_params(server: VLLMServer) -> list[str]:
    """The SamplingParams of every request, as the engine's request log prints them."""
    pattern = r"Received request \S+: params: (SamplingParams\(.*?\)), lora_request"
    return re.findall(pattern, server.log_text())


def test_the_sampler_reads_prompt_ids_with_transformers_own_tokenizer(tiny_model: Path) -> None:
    """transformers 5's apply_chat_template(tokenize=True) returns a BatchEncoding."""
    tokenizer = tokenizer_of(tiny_model)
    sampler = SamplerConfig(data_files=GSM8K, n=2, limit=5, max_prompt_tokens=2000).build(tokenizer=tokenizer)
    assert sampler.errors == [] and len(sampler) == 5
    for state in sampler.prompts:
        text = tokenizer.apply_chat_template(state.message, add_generation_prompt=True, tokenize=False)
        assert state.prompt_ids == tokenizer(text, add_special_tokens=False)["input_ids"]
        assert text.startswith("<|im_start|>user\n") and text.endswith("<|im_start|>assistant\n")


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
async def test_controller_keeps_exactly_what_vllm_sampled(
    vllm: VLLMServer, tiny_model: Path, endpoint: str
) -> None:
    tokenizer = tokenizer_of(tiny_model)
    prompt = SamplerConfig(data_files=GSM8K, n=2, limit=1).build(tokenizer=tokenizer).next_group()
    assert prompt is not None
    params = SampleParams(temperature=1.0, top_p=0.9, max_tokens=12, seed=1234)
    ctl = RolloutControllerConfig(base_urls=[vllm.url], endpoint=endpoint, request_timeout=TIMEOUT).build(
        model=vllm.served_model
    )
    async with ctl:
        states = await ctl.generate_group(prompt, params)
    # the same seeded request, sent by hand
    body: dict[str, Any] = {
        "model": vllm.served_model,
        "temperature": 1.0,
        "top_p": 0.9,
        "max_tokens": 12,
        "seed": 1234,
        "n": 2,
        "return_token_ids": True,
        "return_tokens_as_token_ids": True,
    }
    if endpoint == "chat":
        reply = raw(vllm, "/v1/chat/completions", {**body, "messages": prompt[0].message, "logprobs": True})
    else:
        reply = raw(vllm, "/v1/completions", {**body, "prompt": prompt[0].prompt_ids, "logprobs": 0})
    choices = sorted(reply["choices"], key=lambda c: c["index"])
    for state, choice in zip(states, choices):
        assert state.status == Status.COMPLETED, state.error_msg
        expected = parse_choice(choice, endpoint)
        assert state.response == expected["response"] and state.finish_reason == choice["finish_reason"]
        assert state.response_ids == choice["token_ids"] and len(state.response_ids) > 0
        assert state.logprobs == expected["logprobs"] and len(state.logprobs) == len(state.response_ids)
        assert state.prompt_ids == (reply.get("prompt_token_ids") or choice.get("prompt_token_ids"))
        if state.finish_reason == "length":
            assert state.extra_fields["truncated"] is True and len(state.response_ids) == 12
    # the engine saw the parameters we set
    params_seen = logged_params(vllm)[-2]
    for field in ("n=2", "temperature=1.0", "top_p=0.9", "seed=1234", "max_tokens=12"):
        assert field in params_seen, params_seen
    for state in states:
        state.reward = {"score": 0.0}
    assert len(prepare_train_data([states]).samples) == 2


async def test_the_url_form_keeps_the_sampled_token_ids(vllm: VLLMServer) -> None:
    """It re-tokenized the response text: ids the server never sampled."""
    params = {"temperature": 1.0, "max_tokens": 10, "seed": 7}
    config = SingleTurnAgentLoopConfig(group_size=1, model=vllm.served_model, sample_params=params)
    agent = SingleTurnAgentLoop(config, vllm.url, None, render_prompt=render_messages)  # the text as is
    state = RolloutState(message=[{"role": "user", "content": "What is 6 times 7?"}], data_source="toy")
    try:
        (got,) = await agent.generate_group(state)
    finally:
        await agent.aclose()
    assert got.status == Status.COMPLETED, got.error_msg
    body = {"model": vllm.served_model, "prompt": "What is 6 times 7?", **params, "return_token_ids": True}
    (choice,) = raw(vllm, "/v1/completions", {**body, "logprobs": 1})["choices"]
    assert got.response == choice["text"] and got.response_ids == choice["token_ids"]
    assert got.prompt_ids == choice["prompt_token_ids"] and len(got.logprobs) == len(got.response_ids)


async def test_data_path_with_a_local_hf_checkpoint_and_an_answer_that_is_only_eos(
    vllm: VLLMServer, tiny_model: Path
) -> None:
    """The eval guide's data path with hf_checkpoint = the served model folder: prompts read with its
    tokenizer, a batch produced and laid out for training. One sample per group is forced to end
    at once (its first token is EOS): the group is still trained on."""
    from judger.judgers.config import JudgerConfig
    from judger.trainer.agent_loop_manager import AgentLoopManagerConfig
    from judger.trainer.task import TaskSpecConfig

    eos = tokenizer_of(tiny_model).eos_token_id
    reply = raw(
        vllm,
        "/v1/completions",
        {
            "model": vllm.served_model,
            "prompt": "2 + 2 =",
            "max_tokens": 4,
            "logit_bias": {str(eos): 100},
            "return_token_ids": True,
        },
    )
    (choice,) = reply["choices"]
    assert choice["text"] == "" and choice["token_ids"] == [eos] and choice["finish_reason"] == "stop"

    task = TaskSpecConfig(
        task_name="gsm8k",
        agent_loop_config=SingleTurnAgentLoopConfig(
            hf_checkpoint=str(tiny_model), sample_params={"max_tokens": 8, "temperature": 1.0, "seed": 3}
        ),
        judger_config=JudgerConfig(judger_name="len", reward_handler="judger.testing.handlers:exact_match"),
        sampler_config=SamplerConfig(data_files=GSM8K, n=2, limit=2, shuffle=False),
    )
    rollout = RolloutControllerConfig(base_urls=[vllm.url], endpoint="completions", request_timeout=TIMEOUT)
    manager = AgentLoopManagerConfig(tasks=[task], rollout_config=rollout, max_concurrent_groups=2).build()
    try:
        batch = await manager.produce_batch(2)
    finally:
        await manager.aclose()
    assert len(batch) == 2
    only_eos = batch[0][1]
    only_eos.response, only_eos.response_ids, only_eos.logprobs = "", [eos], [-0.1]
    data = prepare_train_data(batch)
    assert data.skipped == {} and len(data.samples) == 4
    assert data.samples[1].labels[-1] == eos


async def test_a_served_model_name_mismatch_is_refused_at_the_first_request(vllm: VLLMServer) -> None:
    from judger.judgers.config import JudgerConfig
    from judger.trainer.agent_loop_manager import AgentLoopManagerConfig
    from judger.trainer.task import TaskSpecConfig

    task = TaskSpecConfig(
        task_name="t",
        agent_loop_config=SingleTurnAgentLoopConfig(hf_checkpoint="/ckpt/not-this-one"),
        judger_config=JudgerConfig(judger_name="em", reward_handler="judger.testing.handlers:exact_match"),
        sampler_config=SamplerConfig(data_files=GSM8K, n=2, limit=4),
    )
    rollout = RolloutControllerConfig(base_urls=[vllm.url])
    manager = AgentLoopManagerConfig(tasks=[task], rollout_config=rollout).build()
    try:
        with pytest.raises(GenerationError) as caught:
            await manager.produce_batch(2)
    finally:
        await manager.aclose()
    assert vllm.served_model in str(caught.value) and "/ckpt/not-this-one" in str(caught.value)
    assert manager.groups_started == 0


def test_eval_greedy_group_and_truncation_visible(
    vllm: VLLMServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "greedy.jsonl"
    argv = ["eval", str(GSM8K), "--base-url", vllm.url, "--limit", "2", "-n", "3", "--temperature", "0"]
    code, report, err = eval_json(capsys, [*argv, "--max-tokens", "6", "--preset", "gsm8k", "-o", str(out)])
    assert "3 requests of n=1" in err
    gen = report["generation"]
    assert gen["failed_samples"] == 0 and gen["generated_samples"] == 6, err
    by_source = gen["by_data_source"]["openai/gsm8k"]
    # a random model rarely stops within 6 tokens: the table says how many were cut
    assert by_source["length"] + by_source["stop"] == 6 and by_source["generation_failed"] == 0
    assert by_source["length"] >= 1 and 0 < by_source["mean_response_tokens"] <= 6
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["finish_reason"] for r in rows} <= {"stop", "length"}
    assert all(r["truncated"] == (r["finish_reason"] == "length") and r["response_tokens"] <= 6 for r in rows)
    # greedy: the three samples of a prompt are the same
    for uid in {r["uid"] for r in rows}:
        assert len({r["response"] for r in rows if r["uid"] == uid}) == 1
    assert code in (0, 3), err


def test_eval_completions_endpoint_uses_the_chat_template(
    vllm: VLLMServer, tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["eval", str(GSM8K), "--base-url", vllm.url, "--limit", "1", "--max-tokens", "4"]
    code, _, err = eval_json(capsys, [*argv, "--endpoint", "completions"])
    assert code == 2 and "--tokenizer DIR" in err  # the served name is not a folder here
    out = tmp_path / "c.jsonl"
    code, report, err = eval_json(
        capsys, [*argv, "--endpoint", "completions", "--tokenizer", str(tiny_model), "-o", str(out)]
    )
    assert report["generation"]["failed_samples"] == 0, err
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    tokenizer = tokenizer_of(tiny_model)
    text = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=False)
    assert row["prompt_tokens"] == len(tokenizer(text, add_special_tokens=False)["input_ids"])


def received(server: VLLMServer, since: int = 0) -> int:
    """Requests the server's log shows from byte ``since`` on."""
    return server.log_text()[since:].count("Received request")


async def test_a_server_killed_and_restarted_mid_run(vllm: VLLMServer, tiny_model: Path) -> None:
    """The only test with two servers: the second is SIGKILLed while it holds requests (they go to
    the first), then restarted on its port; the probe puts it back and it takes requests again."""
    second = VLLMServer(tiny_model, name="second").start()
    try:
        await asyncio.to_thread(second.wait_ready)
        cfg = RolloutControllerConfig(
            base_urls=[vllm.url, second.url], request_timeout=TIMEOUT, probe_interval=1.0, max_concurrency=4
        )
        groups = list(SamplerConfig(data_files=GSM8K, n=2, limit=12, shuffle=False).build().groups())
        params = SampleParams(temperature=1.0, max_tokens=16, seed=5)
        async with cfg.build(model=vllm.served_model) as ctl:
            work = asyncio.gather(*(ctl.generate_group(g, params) for g in groups))
            while ctl.servers[1].requests < 2:
                await asyncio.sleep(0.05)
            await asyncio.to_thread(second.kill)
            done = await work
            assert all(s.status == Status.COMPLETED for g in done for s in g), [
                s.error_msg for g in done for s in g if s.error_msg
            ]
            # its requests in flight were cut and retried on the first; the next request it is
            # given meets a refused connection and takes it out
            assert ctl.servers[1].failures >= 1 and ctl.servers[0].requests > 0
            between = list(SamplerConfig(data_files=GSM8K, n=2, limit=2, shuffle=False).build().groups())
            dead = await asyncio.gather(*(ctl.generate_group(g, params) for g in between))
            assert all(s.status == Status.COMPLETED for g in dead for s in g)
            assert ctl.servers[1].taken_out == 1 and not ctl.servers[1].healthy

            offset = len(second.log_text())
            second.start()  # the same port: a restarted server
            await asyncio.to_thread(second.wait_ready)
            for _ in range(120):
                if ctl.servers[1].healthy:
                    break
                await asyncio.sleep(0.5)
            assert ctl.servers[1].healthy
            more = list(SamplerConfig(data_files=GSM8K, n=2, limit=4, shuffle=False).build().groups())
            again = await asyncio.gather(*(ctl.generate_group(g, params) for g in more))
        assert all(s.status == Status.COMPLETED for g in again for s in g)
        assert received(second, offset) >= 1
    finally:
        second.stop()


def test_eval_resumes_after_ctrl_c(vllm: VLLMServer, tmp_path: Path) -> None:
    out = tmp_path / "resumed.jsonl"
    cmd = [sys.executable, "-m", "judger", "eval", str(GSM8K), "--base-url", vllm.url, "--limit", "8"]
    cmd += ["-n", "2", "--max-tokens", "16", "--temperature", "1.0", "--seed", "3", "--concurrency", "1"]
    cmd += ["-o", str(out), "--no-progress", "--format", "json", "--request-timeout", str(TIMEOUT)]
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline and first.poll() is None:
        if out.exists() and len(out.read_text().splitlines()) >= 4:  # two groups written
            break
        time.sleep(0.1)
    first.send_signal(signal.SIGINT)  # Ctrl-C
    _, err = first.communicate(timeout=120)
    assert first.returncode == 130 and "run the same command again to resume" in err, err
    kept = len(out.read_text().splitlines())
    second = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    assert second.returncode in (0, 3), second.stderr
    report = json.loads(second.stdout.strip().splitlines()[-1])
    gen = report["generation"]
    assert gen["resumed_samples"] >= 4 and gen["resumed_samples"] + gen["generated_samples"] == 16
    assert gen["resumed_samples"] <= kept and gen["failed_samples"] == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 16 and len({r["uid"] for r in rows}) == 8


async def test_the_url_form_renders_prompts_with_the_checkpoints_chat_template(
    vllm: VLLMServer, tiny_model: Path
) -> None:
    config = SingleTurnAgentLoopConfig(
        hf_checkpoint=str(tiny_model), sample_params={"max_tokens": 4, "temperature": 1.0, "seed": 2}
    )
    agent = SingleTurnAgentLoop(config, vllm.url, None)
    message = [{"role": "user", "content": "What is 6 times 7?"}]
    try:
        (got,) = await agent.generate_group(RolloutState(message=message, data_source="toy"))
    finally:
        await agent.aclose()
    assert got.status == Status.COMPLETED, got.error_msg
    tokenizer = tokenizer_of(tiny_model)
    text = tokenizer.apply_chat_template(message, add_generation_prompt=True, tokenize=False)
    assert got.prompt_ids == tokenizer(text, add_special_tokens=False)["input_ids"]
