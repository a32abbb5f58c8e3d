"""The fake OpenAI-compatible server as a policy: n, stop, token ids, finish reasons, faults."""

from __future__ import annotations

import httpx
import pytest

from judger.testing.fake_openai import PolicyServer

M = "/models/fake-policy"


def chat(url: str, **body: object) -> httpx.Response:
    messages = [{"role": "user", "content": "6 * 7 = 42?"}]
    return httpx.post(url + "/v1/chat/completions", json={"model": M, "messages": messages, **body})


def test_chat_generation_n_stop_logprobs_and_ids(policy: PolicyServer) -> None:
    policy.fake.responder = lambda prompt, j: f"{j}: so it is 42. Done"
    reply = chat(policy.url, n=3, stop=[". "], logprobs=True, return_token_ids=True).json()
    texts = [c["message"]["content"] for c in reply["choices"]]
    assert texts == ["0: so it is 42", "1: so it is 42", "2: so it is 42"]
    assert [c["index"] for c in reply["choices"]] == [0, 1, 2]
    first = reply["choices"][0]
    assert first["finish_reason"] == "stop" and first["token_ids"] == [ord(c) for c in texts[0]]
    assert [e["token"] for e in first["logprobs"]["content"]] == list(texts[0])
    assert reply["prompt_token_ids"] == [ord(c) for c in "6 * 7 = 42?"]
    as_ids = chat(policy.url, logprobs=True, return_tokens_as_token_ids=True).json()["choices"][0]
    assert as_ids["logprobs"]["content"][0]["token"] == f"token_id:{ord('0')}"
    assert "token_ids" not in as_ids
    policy.fake.finish_reason = "abort"
    assert chat(policy.url, max_tokens=2).json()["choices"][0]["finish_reason"] == "abort"


def test_completions_n_orders_choices_by_prompt_then_sample(policy: PolicyServer) -> None:
    body = {"model": M, "prompt": ["a 1", "b 2"], "n": 2, "logprobs": 0, "return_tokens_as_token_ids": True}
    choices = httpx.post(policy.url + "/v1/completions", json=body).json()["choices"]
    assert [(c["index"], c["text"][-2]) for c in choices] == [(0, "1"), (1, "1"), (2, "2"), (3, "2")]
    assert choices[0]["logprobs"]["tokens"][0] == f"token_id:{ord('T')}"


def test_fault_switches(policy: PolicyServer) -> None:
    policy.fake.mode = "error429"
    resp = chat(policy.url)
    assert resp.status_code == 429 and resp.headers["retry-after"] == "0"
    policy.fake.mode = "drop"
    with pytest.raises(httpx.RemoteProtocolError):
        chat(policy.url)
    with pytest.raises(httpx.RemoteProtocolError):
        httpx.get(policy.url + "/v1/models")
    policy.fake.mode = "ok"
    policy.fake.drop_first = policy.fake.chat_requests + 1
    with pytest.raises(httpx.RemoteProtocolError):
        chat(policy.url)
    assert chat(policy.url).status_code == 200
    policy.kill()
    with pytest.raises(httpx.ConnectError):
        chat(policy.url)
