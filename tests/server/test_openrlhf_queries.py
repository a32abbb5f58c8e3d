"""OpenRLHF's queries as OpenRLHF writes them, through its own client code (openrlhf_client.py):
the special-token text its decode keeps, a query that does not start with its prompt, and a
routing config that OpenRLHF (which sends no data_sources) could never route."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from judger.presets import DapoMathJudgerConfig, GSM8KJudgerConfig
from judger.server.app import create_app
from judger.testing import serve_asgi

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]


def _openrlhf() -> ModuleType:
    path = Path(__file__).with_name("openrlhf_client.py")
    spec = importlib.util.spec_from_file_location("openrlhf_client_queries", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


openrlhf = _openrlhf()
PROMPT = "<|im_start|>user\nWhat is 6 * 7?<|im_end|>\n<|im_start|>assistant\n"


def qwen_like_tokenizer(directory: Path) -> Path:
    """The files of a chat tokenizer directory, as Qwen2 ships them (the parts that name tokens)."""
    directory.mkdir()
    (directory / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "added_tokens_decoder": {
                    "151643": {"content": "<|endoftext|>", "special": True},
                    "151644": {"content": "<|im_start|>", "special": True},
                    "151645": {"content": "<|im_end|>", "special": True},
                    "151646": {"content": "<tool_call>", "special": False},
                },
                "eos_token": "<|im_end|>",
                "pad_token": "<|endoftext|>",
            }
        )
    )
    return directory


async def openrlhf_step(url: str, prompt: str, query: str, label: str) -> dict[str, Any]:
    """What OpenRLHF does for one sample: its client's reward step, then its tensors."""
    executor = openrlhf.SingleTurnAgentExecutor(url + "/get_reward")
    output = await executor.reward_step(prompt, label, query, openrlhf.Tokenizer())
    assert output["reward"] is not None, "OpenRLHF got no reward: the request failed"
    return openrlhf.experience_info(output)


def test_special_token_texts_of_a_tokenizer_directory(tmp_path: Path) -> None:
    from judger.server.openrlhf import special_token_texts

    texts = special_token_texts(qwen_like_tokenizer(tmp_path / "tok"))
    assert set(texts) == {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}  # <tool_call> is not special
    with pytest.raises(FileNotFoundError, match="--strip-text"):
        special_token_texts(tmp_path)


@pytest.mark.parametrize("compat", [None, "verl"])
async def test_dapo_scores_a_query_ending_with_eos_text(tmp_path: Path, compat: Any) -> None:
    from judger.server.openrlhf import GetRewardReader

    reader = GetRewardReader.build(tokenizer=qwen_like_tokenizer(tmp_path / "tok"))
    app = create_app(DapoMathJudgerConfig(compat=compat), get_reward_reader=reader)
    with serve_asgi(app) as srv:
        right = await openrlhf_step(srv.url, PROMPT, PROMPT + "6 * 7 = 42.\nAnswer: 42<|im_end|>", "42")
        wrong = await openrlhf_step(srv.url, PROMPT, PROMPT + "Answer: 41<|im_end|><|endoftext|>", "42")
    assert right["reward"] == [[1.0]] and right["judge_failed"] == [[0.0]]
    assert wrong["reward"] == [[-1.0]] and wrong["judge_failed"] == [[0.0]]


async def test_strip_text_given_explicitly() -> None:
    from judger.server.openrlhf import GetRewardReader

    app = create_app(DapoMathJudgerConfig(), get_reward_reader=GetRewardReader.build(strip=["<|im_end|>"]))
    with serve_asgi(app) as srv:
        info = await openrlhf_step(srv.url, PROMPT, PROMPT + "Answer: 42<|im_end|>", "42")
        # stripped wherever it stood, a marker the policy writes would join "4" and "2" into 42
        joined = await openrlhf_step(srv.url, PROMPT, PROMPT + "Answer: 4<|im_end|>2<|im_end|>", "42")
    assert info["reward"] == [[1.0]] and joined["reward"] == [[-1.0]]


async def test_a_query_without_its_prompt_fails_with_the_reason() -> None:
    """OpenRLHF truncates a long prompt from the left: the query holds only the prompt's tail. A
    few-shot prompt holds answers; judged whole, the prompt's ``#### 5`` would earn the reward."""
    few_shot = "Q: 2 + 3?\nA: 2 + 3 = 5. #### 5\nQ: 10 / 2?\nA:"
    app = create_app(GSM8KJudgerConfig())
    with serve_asgi(app) as srv:
        kept_tail = few_shot[12:] + " I don't know."
        info = await openrlhf_step(srv.url, few_shot, kept_tail, "5")
        assert info["reward"] == [[0.0]] and info["judge_failed"] == [[1.0]]
        reply = httpx.post(
            srv.url + "/get_reward",
            json={
                "query": [kept_tail, few_shot + " 10 / 2 = 5 #### 5"],
                "prompts": [few_shot] * 2,
                "labels": ["5"] * 2,
            },
        ).json()
    assert reply["rewards"] == [0.0, 1.0]
    assert reply["extra_logs"]["judge_failed"] == [1.0, 0.0]
    assert "does not start with its prompt" in reply["failures"][0]["message"]
    assert reply["failures"][1] is None


async def test_a_leading_bos_text_is_not_a_missing_prompt() -> None:
    from judger.server.openrlhf import GetRewardReader

    reader = GetRewardReader.build(strip=["<s>"])
    app = create_app(GSM8KJudgerConfig(), get_reward_reader=reader)
    with serve_asgi(app) as srv:
        info = await openrlhf_step(srv.url, "Q: 10 / 2?\nA:", "<s>Q: 10 / 2?\nA: #### 5</s>", "5")
    assert info["reward"] == [[1.0]]


def _serve_process(*args: str) -> tuple[subprocess.Popen[bytes], str]:
    """``judger serve ARGS`` as a real process on 127.0.0.1, once ``/health`` answers."""
    import os
    import time

    from judger.testing.servers import free_port

    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "judger.cli.main",
        "serve",
        *args,
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    env = {k: v for k, v in os.environ.items() if k != "JUDGER_SERVER_TOKEN"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"judger serve did not start: {proc.communicate()[1]!r}")


async def test_judger_serve_strips_the_end_markers_openrlhf_leaves_by_default() -> None:
    """Started as the OpenRLHF guide shows (no --tokenizer, no --strip-text), the DAPO
    preset scored every right answer -1: the response ended with ``<|im_end|>``. The markers go
    from the end only, and the server says which: a policy that writes one in the middle of its
    text is judged on all of it, neither joining what the marker separates nor hiding what follows."""
    proc, url = _serve_process("--preset", "DapoMathJudgerConfig")
    try:
        right = await openrlhf_step(url, PROMPT, PROMPT + "6 * 7 = 42.\nAnswer: 42<|im_end|>", "42")
        padded = await openrlhf_step(
            url, PROMPT, PROMPT + "Answer: 42<|im_end|><|endoftext|><|endoftext|>", "42"
        )
        # a marker written in the middle: "4" and "2" are not read as 42 ...
        joined = await openrlhf_step(url, PROMPT, PROMPT + "Answer: 4<|im_end|>2<|im_end|>", "42")
        # ... and the answer after it is the answer, as a grader that stopped there would not see
        hidden = await openrlhf_step(url, PROMPT, PROMPT + "Answer: 42<|im_end|>\nAnswer: 41<|im_end|>", "42")
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=30)
    assert right["reward"] == [[1.0]] and padded["reward"] == [[1.0]]
    assert joined["reward"] == [[-1.0]] and hidden["reward"] == [[-1.0]]
    assert all(i["judge_failed"] == [[0.0]] for i in (right, padded, joined, hidden))
    said = stderr.decode()
    assert (
        "/get_reward strips the end markers of the common chat templates from the end of each response"
        in said
    )
    assert "<|im_end|>" in said and "<|eot_id|>" in said


def test_end_markers_go_from_the_end_only() -> None:
    from judger.server.openrlhf import DEFAULT_END_MARKERS, GetRewardReader, strip_end_markers

    assert strip_end_markers("Answer: 42 <|im_end|>\n<|endoftext|>\n", DEFAULT_END_MARKERS) == "Answer: 42 "
    assert strip_end_markers("a<|im_end|>b", DEFAULT_END_MARKERS) == "a<|im_end|>b"
    assert strip_end_markers("no marker \n", DEFAULT_END_MARKERS) == "no marker \n"
    given = GetRewardReader.build(strip=["<|im_end|>"])
    assert given.strip == ("<|im_end|>",) and "--strip-text" in given.describe()
    assert given.response(PROMPT + "x</s>", PROMPT) == "x</s>"  # only the markers it was given


ROUTING_CONFIG = "judger.compat.verl.router:VerlDefaultJudgerConfig"


def serve(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "judger.cli.main", "serve", *args, "--port", "9", "--log-level", "warning"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_a_routing_config_without_data_sources_is_refused_at_start_up() -> None:
    refused = serve(ROUTING_CONFIG)
    assert refused.returncode == 2
    assert "data_source" in refused.stderr and "--data-source NAME" in refused.stderr
    unknown = serve(ROUTING_CONFIG, "--data-source", "no_such_source")
    assert unknown.returncode == 2 and "no_such_source" in unknown.stderr


async def test_data_source_option_routes_every_query() -> None:
    from judger.compat.verl import default_judger_config
    from judger.server.openrlhf import GetRewardReader

    app = create_app(default_judger_config(), get_reward_reader=GetRewardReader(data_source="openai/gsm8k"))
    with serve_asgi(app) as srv:
        info = await openrlhf_step(srv.url, "Q:", "Q: #### 5", "5")
    assert info["reward"] == [[1.0]] and info["judge_failed"] == [[0.0]]


async def test_serve_options_reach_get_reward(tmp_path: Path) -> None:
    """``judger serve --tokenizer PATH`` and ``--strip-text`` as the command line gives them."""
    import argparse

    from judger.cli import serve as serve_cli

    parser = argparse.ArgumentParser()
    serve_cli.add_arguments(parser)
    tokenizer = qwen_like_tokenizer(tmp_path / "tok")
    for flags in (["--tokenizer", str(tokenizer)], ["--strip-text", "<|im_end|>"]):
        args = parser.parse_args(["--preset", "DapoMathJudgerConfig", *flags])
        with serve_asgi(serve_cli._app(serve_cli._spec(args))) as srv:
            info = await openrlhf_step(srv.url, PROMPT, PROMPT + "Answer: 42<|im_end|>", "42")
        assert info["reward"] == [[1.0]], flags
    missing = parser.parse_args(["--preset", "gsm8k", "--tokenizer", str(tmp_path)])
    with pytest.raises(FileNotFoundError, match="--strip-text"):
        serve_cli._app(serve_cli._spec(missing))
