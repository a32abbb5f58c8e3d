"""A small, honest fake of an OpenAI-compatible server (vLLM / lmdeploy / sglang), for tests.

``FakeOpenAI().app`` is a FastAPI app; serve it with :func:`judger.testing.serve_asgi`::

    fake = FakeOpenAI(model="fake-grader")
    with serve_asgi(fake.app) as server:
        judger = CompassVerifierV2Config(hosts=[server.url]).build()

Endpoints and what they answer (all deterministic):

``GET /v1/models``
    ``{"object": "list", "data": [{"id": <model>, "object": "model", ...}]}``.

``POST /v1/chat/completions``
    The ``model`` field must name the served model (404 otherwise, as vLLM does). When the last
    user message is a grading prompt built on :mod:`judger.verifiers.prompts`' markers, the fake
    grades it: the final answer of the response section (the last ``\\boxed{...}``, else the last
    number, else the whole stripped text) is compared with the gold section after normalisation
    (spaces, ``$`` and a trailing ``.`` dropped; numbers compared as numbers). It replies ``"A"``
    when they agree, ``"B"`` when they do not, ``"C"`` when the response section is empty. With
    ``reply_style="cot"`` the letter comes as ``"... Final Judgment: \\boxed{A}"``. Any other
    chat request is answered like ``/v1/completions`` on the concatenated message contents.

``POST /v1/completions``
    For each prompt (a string, a list of strings, or token ids: a list of ints or a list of such
    lists, decoded with the fake tokenizer below) the text ``"The answer is \\boxed{N}"``, N
    being the last integer in the prompt (0 if none), ``finish_reason="stop"``; ``max_tokens``
    shorter than the text cuts it and gives ``finish_reason="length"``. Tokens are characters
    (token id = ``ord(c)``); when ``logprobs`` is set, each choice carries ``token_ids`` and an
    OpenAI-style ``logprobs`` object (``tokens``, ``token_logprobs`` all -0.01, ``text_offset``).
    ``usage`` counts prompt and completion tokens the same way.

Behaviour switches (plain attributes; safe to change while the server runs):

``mode``
    ``"ok"`` (default); ``"error500"`` / ``"error503"`` (every request to the completion endpoints
    fails with that status; 503 carries ``Retry-After: 0``); ``"stall"`` (hold the request up to
    ``stall_seconds``, or until :meth:`release`); ``"garbage"`` (reply text with no verdict).
``fail_first``
    The first N completion requests fail with ``fail_status`` whatever the mode.
``delay``
    Seconds each completion request waits before answering (to observe concurrency).
``models_status``
    When set, ``GET /v1/models`` fails with that status.

Counters: ``chat_requests``, ``completion_requests``, ``models_requests``, ``in_flight``,
``max_in_flight``; ``requests`` keeps the last 1,000 request bodies. :meth:`reset` clears them.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import deque
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from judger.verifiers.prompts import split_grading_prompt

_BOXED_START = "\\boxed{"
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
_INT = re.compile(r"-?\d+")
GARBAGE_REPLY = "I am not sure how to grade this one."


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` (braces matched), or None."""
    start = text.rfind(_BOXED_START)
    if start < 0:
        return None
    i = start + len(_BOXED_START)
    depth = 1
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i:j]
    return None


def final_answer(response: str) -> str:
    """What the fake grader takes as the response's final answer."""
    boxed = last_boxed(response)
    if boxed is not None:
        return boxed
    numbers = _NUMBER.findall(response)
    if numbers:
        return numbers[-1]
    return response.strip()


def _normalize(answer: str) -> str:
    text = answer.replace(" ", "").replace("$", "").replace(",", "").rstrip(".")
    try:
        value = float(text)
    except ValueError:
        return text
    return repr(int(value)) if value.is_integer() else repr(value)


def grade(gold: str, response: str) -> str:
    """The fake grader's verdict letter for a (gold, response) pair."""
    if not response.strip():
        return "C"
    return "A" if _normalize(final_answer(response)) == _normalize(gold) else "B"


def completion_text(prompt: str) -> str:
    """The fake generator's deterministic answer to ``prompt``."""
    ints = _INT.findall(prompt)
    return f"The answer is \\boxed{{{ints[-1] if ints else 0}}}"


def _prompts(prompt: Any) -> list[str]:
    """The prompts of a completions request: a string, a list of strings, or token ids (one list
    of ints, or a list of them), decoded with the fake's tokenizer (token id = ``ord(c)``)."""
    if isinstance(prompt, str):
        return [prompt]
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return ["".join(map(chr, prompt))]
    if isinstance(prompt, list):
        return ["".join(map(chr, p)) if isinstance(p, list) else str(p) for p in prompt]
    return [str(prompt)]


class FakeOpenAI:
    """State and switches of one fake server; ``.app`` is the FastAPI app serving it."""

    def __init__(self, model: str = "fake-grader", reply_style: str = "letter") -> None:
        self.model = model
        self.reply_style = reply_style
        self.mode = "ok"
        self.fail_first = 0
        self.fail_status = 500
        self.delay = 0.0
        self.stall_seconds = 60.0
        self.models_status: int | None = None
        self._released = False
        self.reset()
        self.app = self._build_app()

    def reset(self) -> None:
        self.chat_requests = 0
        self.completion_requests = 0
        self.models_requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.requests: deque[dict[str, Any]] = deque(maxlen=1000)

    def release(self) -> None:
        """End every stall now and make later ones return at once."""
        self._released = True

    # --- behaviour -------------------------------------------------------------------------------

    async def _hold(self) -> Any:
        """Apply delay / failure / stall switches; a response object when the request must fail."""
        total = self.chat_requests + self.completion_requests
        if self.delay:
            await asyncio.sleep(self.delay)
        if total <= self.fail_first:
            return JSONResponse({"error": {"message": "injected failure"}}, status_code=self.fail_status)
        if self.mode in ("error500", "error503"):
            status = 500 if self.mode == "error500" else 503
            headers = {"Retry-After": "0"} if status == 503 else None
            return JSONResponse({"error": {"message": f"fake {status}"}}, status_code=status, headers=headers)
        if self.mode == "stall":
            deadline = time.monotonic() + self.stall_seconds
            while not self._released and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
        return None

    def _model_error(self, body: dict[str, Any]) -> Any:
        if body.get("model") != self.model:
            message = f"The model `{body.get('model')}` does not exist."
            return JSONResponse({"error": {"message": message, "code": 404}}, status_code=404)
        return None

    def chat_reply(self, messages: list[dict[str, Any]]) -> str:
        if self.mode == "garbage":
            return GARBAGE_REPLY
        user = [m.get("content") or "" for m in messages if m.get("role") == "user"]
        sections = split_grading_prompt(user[-1]) if user else None
        if sections is None:
            return completion_text("\n".join(str(m.get("content") or "") for m in messages))
        letter = grade(sections["gold_answer"], sections["response"])
        if self.reply_style == "cot":
            return f"I compared the final answer with the gold answer.\nFinal Judgment: \\boxed{{{letter}}}"
        return letter

    async def _admit(self, body: dict[str, Any]) -> Any:
        """Record a generation request and hold it as the mode says: an error response, or None.

        In-flight counting covers the hold (stall mode), which is what concurrency tests measure.
        """
        self.requests.append(body)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return self._model_error(body) or await self._hold()
        finally:
            self.in_flight -= 1

    # --- the app ---------------------------------------------------------------------------------

    def _build_app(self) -> FastAPI:
        app = FastAPI(title="fake OpenAI-compatible server")
        fake = self

        @app.get("/v1/models")
        async def models() -> Any:
            fake.models_requests += 1
            if fake.models_status is not None:
                return JSONResponse({"error": {"message": "injected"}}, status_code=fake.models_status)
            return {
                "object": "list",
                "data": [{"id": fake.model, "object": "model", "owned_by": "judger-fake"}],
            }

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> Any:
            body = await request.json()
            fake.chat_requests += 1
            error = await fake._admit(body)
            if error is not None:
                return error
            text = fake.chat_reply(body.get("messages") or [])
            prompt_tokens = sum(len(str(m.get("content") or "")) for m in body.get("messages") or [])
            return {
                "id": f"chatcmpl-{fake.chat_requests}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": fake.model,
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": len(text),
                    "total_tokens": prompt_tokens + len(text),
                },
            }

        @app.post("/v1/completions")
        async def completions(request: Request) -> Any:
            body = await request.json()
            fake.completion_requests += 1
            error = await fake._admit(body)
            if error is not None:
                return error
            prompts = _prompts(body.get("prompt", ""))
            choices = [
                fake._completion_choice(i, str(p), body.get("max_tokens"), body.get("logprobs"))
                for i, p in enumerate(prompts)
            ]
            completion_tokens = sum(len(c["text"]) for c in choices)
            prompt_tokens = sum(len(str(p)) for p in prompts)
            return {
                "id": f"cmpl-{fake.completion_requests}",
                "object": "text_completion",
                "created": int(time.time()),
                "model": fake.model,
                "choices": choices,
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            }

        return app

    def _completion_choice(self, index: int, prompt: str, max_tokens: Any, logprobs: Any) -> dict[str, Any]:
        text = GARBAGE_REPLY if self.mode == "garbage" else completion_text(prompt)
        finish = "stop"
        if isinstance(max_tokens, int) and 0 <= max_tokens < len(text):
            text, finish = text[:max_tokens], "length"
        choice: dict[str, Any] = {"index": index, "text": text, "finish_reason": finish, "logprobs": None}
        if logprobs is not None and logprobs is not False:
            choice["token_ids"] = [ord(c) for c in text]
            choice["logprobs"] = {
                "tokens": list(text),
                "token_logprobs": [-0.01] * len(text),
                "top_logprobs": None,
                "text_offset": list(range(len(text))),
            }
        return choice
