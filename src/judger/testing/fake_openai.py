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
    ``reply_style="cot"`` the letter comes as ``"... Final Judgment: \\boxed{A}"``; with
    ``reply_style="quote"`` the grader first restates the response's final answer, as
    chain-of-thought graders do (``"The final answer of the response is \\boxed{5}; the gold answer
    is 7.\nFinal Judgment: B"``), so a response can put words into the reply. Any other
    chat request is a generation: answered like ``/v1/completions`` on the concatenated message
    contents (the "chat template" is one content per line), with ``n`` choices; ``logprobs: true``
    adds OpenAI's ``logprobs.content`` list (tokens ``"token_id:N"`` when
    ``return_tokens_as_token_ids`` is set, as vLLM does); ``return_token_ids: true`` adds
    ``prompt_token_ids`` (on the response) and ``token_ids`` (on each choice), as vLLM >= 0.10.2.

``POST /v1/completions``
    For each prompt (a string, a list of strings, or token ids: a list of ints or a list of such
    lists, decoded with the fake tokenizer below) the text ``"The answer is \\boxed{N}"``, N
    being the last integer in the prompt (0 if none), ``finish_reason="stop"``; ``max_tokens``
    shorter than the text cuts it and gives ``finish_reason="length"``. Tokens are characters
    (token id = ``ord(c)``); when ``logprobs`` is set, each choice carries an OpenAI-style
    ``logprobs`` object (``tokens``, ``token_logprobs`` all -0.01, ``text_offset``); like vLLM, no
    ``token_ids`` unless ``return_token_ids`` asks for them.
    ``usage`` counts prompt and completion tokens the same way. ``n`` gives n choices per prompt
    (index ``prompt * n + sample``, as vLLM orders them); ``stop`` (a string or a list) cuts the
    text before the first stop string (``finish_reason="stop"``); ``return_token_ids: true`` adds
    ``prompt_token_ids`` and ``token_ids`` to each choice; ``return_tokens_as_token_ids`` writes
    ``logprobs.tokens`` as ``"token_id:N"``.

A generation's text is ``responder(prompt, sample_index)`` when that attribute is set (a plain
function: tests use it to script right and wrong answers), else the ``\\boxed{N}`` answer above.

Behaviour switches (plain attributes; safe to change while the server runs):

``mode``
    ``"ok"`` (default); ``"error500"`` / ``"error503"`` / ``"error429"`` (every request to the
    completion endpoints fails with that status; 503 and 429 carry ``Retry-After: 0``); ``"drop"``
    (the server starts every reply, ``/v1/models`` included, and closes the connection halfway
    through it, as a crashing server does); ``"stall"`` (hold the request up to
    ``stall_seconds``, or until :meth:`release`); ``"garbage"`` (reply text with no verdict).
``fail_first``
    The first N completion requests fail with ``fail_status`` whatever the mode.
``drop_first``
    The first N completion requests have their connection dropped halfway through the reply.
``finish_reason``
    When set, every generated choice ends with this finish reason (``"abort"``, ``"error"``...).
``delay``
    Seconds each completion request waits before answering (injected slowness; to observe
    concurrency and deadlines).
``models_status``
    When set, ``GET /v1/models`` fails with that status.
``models_delay``
    Seconds ``GET /v1/models`` waits before answering (a slow probe).
``token_ids``
    False: ``return_token_ids`` and ``return_tokens_as_token_ids`` are ignored, as by a strict
    OpenAI server (or vLLM before 0.10.2 for the first): replies carry text, never token ids.
``ignores_n``
    True: every prompt gets one choice whatever ``n`` asks (llama.cpp's server, and others).
``chat_logprobs_need_top``
    True: a chat reply carries logprobs only when ``top_logprobs`` is set beside ``logprobs``.
``any_model``
    True: a request naming any model is served (no 404).
``token_id_prompts``
    False: a completions prompt of token ids is answered HTTP 500.

:class:`LlamaCppFake` turns on all four, with ``token_ids`` off: a server behaving as
llama-cpp-python's (``python -m llama_cpp.server``).

Counters: ``chat_requests``, ``completion_requests``, ``models_requests``, ``in_flight``,
``max_in_flight``; ``requests`` keeps the last 1,000 request bodies. :meth:`reset` clears them.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

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


class _DroppedReply(Response):
    """Starts a 200 reply promising more body than it sends, then returns: uvicorn closes the
    connection, and the client sees the peer hang up mid-reply (httpx: RemoteProtocolError)."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        headers = [(b"content-type", b"application/json"), (b"content-length", b"4096")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b'{"id": "cut-', "more_body": True})


def _stop_at(text: str, stop: Any) -> tuple[str, bool]:
    stops = [stop] if isinstance(stop, str) else [s for s in stop or [] if isinstance(s, str) and s]
    cut = min((i for i in (text.find(s) for s in stops) if i >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)


class FakeOpenAI:
    """State and switches of one fake server; ``.app`` is the FastAPI app serving it."""

    def __init__(self, model: str = "fake-grader", reply_style: str = "letter") -> None:
        self.model = model
        self.reply_style = reply_style
        self.mode = "ok"
        self.fail_first = 0
        self.fail_status = 500
        self.drop_first = 0
        self.finish_reason: str | None = None
        self.responder: Callable[[str, int], str] | None = None
        self.delay = 0.0
        # requests served at once (each for ``delay``), the rest queued as a real server queues them
        self.capacity: int | None = None
        self._serving: asyncio.Semaphore | None = None
        self.stall_seconds = 60.0
        self.models_status: int | None = None
        self.token_ids = True
        self.ignores_n = False
        self.chat_logprobs_need_top = False
        self.any_model = False
        self.token_id_prompts = True
        self.models_delay = 0.0
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
        if self.capacity:
            if self._serving is None:
                self._serving = asyncio.Semaphore(self.capacity)
            async with self._serving:
                await asyncio.sleep(self.delay)
        elif self.delay:
            await asyncio.sleep(self.delay)
        if total <= self.fail_first:
            return JSONResponse({"error": {"message": "injected failure"}}, status_code=self.fail_status)
        if total <= self.drop_first or self.mode == "drop":
            return _DroppedReply()
        if self.mode in ("error500", "error503", "error429"):
            status = int(self.mode[len("error") :])
            headers = {"Retry-After": "0"} if status != 500 else None
            return JSONResponse({"error": {"message": f"fake {status}"}}, status_code=status, headers=headers)
        if self.mode == "stall":
            deadline = time.monotonic() + self.stall_seconds
            while not self._released and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
        return None

    def _model_error(self, body: dict[str, Any]) -> Any:
        if body.get("model") != self.model and not self.any_model:
            message = f"The model `{body.get('model')}` does not exist."
            return JSONResponse({"error": {"message": message, "code": 404}}, status_code=404)
        return None

    def chat_reply(self, messages: list[dict[str, Any]]) -> str:
        if self.mode == "garbage":
            return GARBAGE_REPLY
        user = [m.get("content") or "" for m in messages if m.get("role") == "user"]
        sections = split_grading_prompt(user[-1]) if user else None
        if sections is None:
            return self.generate_text(render_chat(messages), 0)
        letter = grade(sections["gold_answer"], sections["response"])
        if self.reply_style == "cot":
            return f"I compared the final answer with the gold answer.\nFinal Judgment: \\boxed{{{letter}}}"
        if self.reply_style == "quote":
            answer = final_answer(sections["response"])
            gold = sections["gold_answer"].strip()
            restated = f"The final answer of the response is \\boxed{{{answer}}}; the gold answer is {gold}."
            return f"{restated}\nFinal Judgment: {letter}"
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
            if fake.models_delay:
                await asyncio.sleep(fake.models_delay)
            if fake.mode == "drop":
                return _DroppedReply()
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
            messages = body.get("messages") or []
            if not fake._is_grading(messages):
                return fake._chat_generation(fake._served_fields(body), messages)
            text = fake.chat_reply(messages)
            prompt_tokens = sum(len(str(m.get("content") or "")) for m in messages)
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
            if not fake.token_id_prompts and _has_token_ids(body.get("prompt")):
                return _validation_500("prompt", "Input should be a valid string")
            prompts = _prompts(body.get("prompt", ""))
            n = fake._choices(body)
            body = fake._served_fields(body)
            choices = [
                fake._completion_choice(i * n + j, str(p), j, body)
                for i, p in enumerate(prompts)
                for j in range(n)
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

    def _served_fields(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.token_ids:
            return body
        return {k: v for k, v in body.items() if k not in ("return_token_ids", "return_tokens_as_token_ids")}

    def _choices(self, body: dict[str, Any]) -> int:
        """How many choices a prompt gets: ``n``, or one when the server ignores ``n``."""
        return 1 if self.ignores_n else _count(body.get("n"))

    def _is_grading(self, messages: list[dict[str, Any]]) -> bool:
        user = [m.get("content") or "" for m in messages if m.get("role") == "user"]
        return bool(user) and split_grading_prompt(str(user[-1])) is not None

    def generate_text(self, prompt: str, sample: int) -> str:
        """The text the fake generates for ``prompt`` as its ``sample``-th sample."""
        if self.mode == "garbage":
            return GARBAGE_REPLY
        if self.responder is not None:
            return self.responder(prompt, sample)
        return completion_text(prompt)

    def _sample(self, prompt: str, sample: int, body: dict[str, Any]) -> tuple[str, str]:
        """``(text, finish_reason)`` after ``stop``, ``max_tokens`` and the finish_reason switch."""
        text, stopped = _stop_at(self.generate_text(prompt, sample), body.get("stop"))
        finish = "stop"
        max_tokens = body.get("max_tokens", body.get("max_completion_tokens"))
        if not stopped and isinstance(max_tokens, int) and 0 <= max_tokens < len(text):
            text, finish = text[:max_tokens], "length"
        return text, self.finish_reason or finish

    def _chat_generation(self, body: dict[str, Any], messages: list[dict[str, Any]]) -> dict[str, Any]:
        prompt = render_chat(messages)
        as_ids = bool(body.get("return_tokens_as_token_ids"))
        with_logprobs = bool(body.get("logprobs")) and (
            not self.chat_logprobs_need_top or body.get("top_logprobs") is not None
        )
        choices = []
        for j in range(self._choices(body)):
            text, finish = self._sample(prompt, j, body)
            choice: dict[str, Any] = {
                "index": j,
                "message": {"role": "assistant", "content": text},
                "finish_reason": finish,
                "logprobs": None,
            }
            if with_logprobs:
                choice["logprobs"] = {
                    "content": [
                        {"token": f"token_id:{ord(c)}" if as_ids else c, "logprob": -0.01, "top_logprobs": []}
                        for c in text
                    ]
                }
            if body.get("return_token_ids"):
                choice["token_ids"] = [ord(c) for c in text]
            choices.append(choice)
        completion_tokens = sum(len(c["message"]["content"]) for c in choices)
        reply: dict[str, Any] = {
            "id": f"chatcmpl-{self.chat_requests}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": choices,
            "usage": {
                "prompt_tokens": len(prompt),
                "completion_tokens": completion_tokens,
                "total_tokens": len(prompt) + completion_tokens,
            },
        }
        if body.get("return_token_ids"):
            reply["prompt_token_ids"] = [ord(c) for c in prompt]
        return reply

    def _completion_choice(
        self, index: int, prompt: str, sample: int, body: dict[str, Any]
    ) -> dict[str, Any]:
        text, finish = self._sample(prompt, sample, body)
        choice: dict[str, Any] = {"index": index, "text": text, "finish_reason": finish, "logprobs": None}
        logprobs = body.get("logprobs")
        if logprobs is not None and logprobs is not False:
            as_ids = bool(body.get("return_tokens_as_token_ids"))
            choice["logprobs"] = {
                "tokens": [f"token_id:{ord(c)}" for c in text] if as_ids else list(text),
                "token_logprobs": [-0.01] * len(text),
                "top_logprobs": None,
                "text_offset": list(range(len(text))),
            }
        if body.get("return_token_ids"):
            choice["token_ids"] = [ord(c) for c in text]
            choice["prompt_token_ids"] = [ord(c) for c in prompt]
        return choice


def render_chat(messages: list[dict[str, Any]]) -> str:
    """The fake's chat template: each message's content on its own line."""
    return "\n".join(str(m.get("content") or "") for m in messages)


def _has_token_ids(prompt: Any) -> bool:
    return isinstance(prompt, list) and any(
        isinstance(p, int) or (isinstance(p, list) and any(isinstance(t, int) for t in p)) for p in prompt
    )


def _validation_500(field: str, message: str) -> JSONResponse:
    """llama-cpp-python's answer to a request its schema refuses: its route handler turns the
    validation error into a 500 (a status judger retries), with the error as the message."""
    detail = f"1 validation error for CreateCompletionRequest\n{field}\n  {message}"
    return JSONResponse(
        {"error": {"message": detail, "type": "internal_server_error", "param": None, "code": None}},
        status_code=500,
    )


class LlamaCppFake(FakeOpenAI):
    """A fake that answers as llama-cpp-python's OpenAI-compatible server does (checked against its
    ``llama_cpp/server``): ``n`` ignored (one choice per prompt), no token ids (vLLM's
    ``return_token_ids`` fields are ignored), chat logprobs only when ``top_logprobs`` is set, a
    token-id prompt answered HTTP 500 (its schema takes text only), and any model name served (one
    model is loaded; ``/v1/models`` lists its path)."""

    def __init__(
        self, model: str = "/models/SmolLM2-135M-Instruct.Q4_1.gguf", reply_style: str = "letter"
    ) -> None:
        super().__init__(model=model, reply_style=reply_style)
        self.token_ids = False
        self.ignores_n = True
        self.chat_logprobs_need_top = True
        self.any_model = True
        self.token_id_prompts = False


def _count(n: Any) -> int:
    return n if isinstance(n, int) and not isinstance(n, bool) and n >= 1 else 1


def app() -> FastAPI:
    """A fresh fake's app, for ``uvicorn --factory judger.testing.fake_openai:app`` (benchmarks run
    the fake in its own process). ``FAKE_OPENAI_MODEL`` names the model (default ``fake-policy``)."""
    import os

    return FakeOpenAI(model=os.environ.get("FAKE_OPENAI_MODEL", "fake-policy")).app


def kill_server(fake: FakeOpenAI, server: Any, settle_s: float = 0.3) -> None:
    """Take a fake served by :class:`judger.testing.LoopbackServer` down as a crashing server goes:
    replies in flight are cut halfway (``mode="drop"``), then the listening socket closes, so new
    connections are refused. Call it from any thread but the server's own."""
    fake.mode = "drop"
    time.sleep(settle_s)  # let requests held in ``delay`` reach their (cut) reply
    server.server.force_exit = True
    server.server.should_exit = True
    server.thread.join(10.0)


class PolicyServer:
    """A fake serving as the policy model on 127.0.0.1: ``.fake`` (its switches), ``.server``, ``.url``;
    ``fake=LlamaCppFake()`` serves one that behaves as llama.cpp's server."""

    def __init__(
        self, model: str = "fake-policy", port: int | None = None, fake: FakeOpenAI | None = None
    ) -> None:
        from judger.testing.servers import LoopbackServer

        self.fake = fake if fake is not None else FakeOpenAI(model=model)
        self.server = LoopbackServer(self.fake.app, port=port, timeout_graceful_shutdown=1).start()

    @property
    def url(self) -> str:
        return self.server.url

    def kill(self) -> None:
        """Crash it (see :func:`kill_server`)."""
        kill_server(self.fake, self.server)

    def stop(self) -> None:
        self.fake.release()
        if self.server.thread.is_alive():
            self.server.stop()
