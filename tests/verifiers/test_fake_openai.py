"""The fake OpenAI-compatible server itself: what it answers, and its switches."""

from __future__ import annotations

import httpx

from judger.testing.fake_openai import FakeOpenAI, completion_text, grade
from judger.verifiers import GRADER_PROMPT, render_prompt


def _grading(gold: str, response: str) -> dict:
    prompt = render_prompt(GRADER_PROMPT, question="q", gold_answer=gold, response=response)
    return {"model": "fake-grader", "messages": [{"role": "user", "content": prompt}], "max_tokens": 1}


def test_grade_rules() -> None:
    assert grade("5", "so the answer is \\boxed{5}") == "A"
    assert grade("5", "5.0") == "A"
    assert grade("1,000", "it is 1000") == "A"
    assert grade("\\frac{1}{2}", "\\boxed{\\frac{1}{2}}") == "A"
    assert grade("5", "\\boxed{6}") == "B"
    assert grade("5", "   ") == "C"


def test_models_chat_and_completions(fake_grader: tuple[FakeOpenAI, str]) -> None:
    fake, url = fake_grader
    assert httpx.get(url + "/v1/models").json()["data"][0]["id"] == "fake-grader"
    reply = httpx.post(url + "/v1/chat/completions", json=_grading("7", "\\boxed{7}")).json()
    assert reply["choices"][0]["message"]["content"] == "A"
    reply = httpx.post(url + "/v1/chat/completions", json=_grading("7", "\\boxed{8}")).json()
    assert reply["choices"][0]["message"]["content"] == "B"
    wrong_model = httpx.post(url + "/v1/chat/completions", json={**_grading("7", "7"), "model": "other"})
    assert wrong_model.status_code == 404
    fake.reply_style = "cot"
    reply = httpx.post(url + "/v1/chat/completions", json=_grading("7", "")).json()
    assert reply["choices"][0]["message"]["content"].endswith("Final Judgment: \\boxed{C}")

    body = {"model": "fake-grader", "prompt": ["Q: 12 + 30 = 42?", "no numbers"], "logprobs": 1}
    choices = httpx.post(url + "/v1/completions", json=body).json()["choices"]
    assert choices[0]["text"] == "The answer is \\boxed{42}" == completion_text("Q: 12 + 30 = 42?")
    assert choices[0]["finish_reason"] == "stop"
    assert "token_ids" not in choices[0]  # as vLLM: only when return_token_ids asks for them
    assert len(choices[0]["logprobs"]["token_logprobs"]) == len(choices[0]["text"])
    assert choices[1]["text"].endswith("{0}")
    cut = httpx.post(
        url + "/v1/completions", json={"model": "fake-grader", "prompt": "1", "max_tokens": 3}
    ).json()
    assert cut["choices"][0] == {"index": 0, "text": "The", "finish_reason": "length", "logprobs": None}
    ids = [ord(c) for c in "7 * 6 = 42"]
    for prompt in (ids, [ids, ids]):
        texts = [
            c["text"]
            for c in httpx.post(
                url + "/v1/completions", json={"model": "fake-grader", "prompt": prompt}
            ).json()["choices"]
        ]
        assert texts == ["The answer is \\boxed{42}"] * (1 if prompt is ids else 2)
    assert fake.chat_requests == 4 and fake.completion_requests == 4 and fake.models_requests == 1


def test_failure_switches(fake_grader: tuple[FakeOpenAI, str]) -> None:
    fake, url = fake_grader
    fake.mode = "error503"
    resp = httpx.post(url + "/v1/chat/completions", json=_grading("1", "1"))
    assert resp.status_code == 503 and resp.headers["retry-after"] == "0"
    fake.mode = "garbage"
    reply = httpx.post(url + "/v1/chat/completions", json=_grading("1", "1")).json()
    assert reply["choices"][0]["message"]["content"] == "I am not sure how to grade this one."
    fake.mode, fake.fail_first, fake.fail_status = "ok", 3, 500  # 2 requests so far: one more fails
    assert httpx.post(url + "/v1/chat/completions", json=_grading("1", "1")).status_code == 500
    assert httpx.post(url + "/v1/chat/completions", json=_grading("1", "1")).status_code == 200
    fake.models_status = 500
    assert httpx.get(url + "/v1/models").status_code == 500
