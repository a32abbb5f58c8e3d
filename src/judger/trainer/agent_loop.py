"""A single-turn agent loop: generate a group of responses, then judge them.

``SingleTurnAgentLoop(config, generate, judger)`` takes ``generate`` as either

- a :class:`~judger.trainer.controller.RolloutController` (several OpenAI-compatible servers,
  balanced, retried; a group goes out as requests of ``sample_params.n`` samples, the whole group in
  one request by default); or
- an async callable ``generate(state) -> RolloutState | dict | None`` that fills ``response``
  (and ideally ``response_ids``, ``logprobs``, ``finish_reason``) on the state, or returns those
  fields as a dict; or
- the base URL of an OpenAI-compatible server (vLLM, lmdeploy, sglang): ``POST /v1/completions``
  with the prompt rendered by ``render_prompt``, else by ``hf_checkpoint``'s chat template when its
  tokenizer loads from local files (with neither, the loop is refused: untemplated text is not what
  an instruct model was trained on), and ``config.sample_params``; the response's token ids are the
  server's, never a re-tokenization.

Then :func:`run_judger` scores the group: in single mode (the default) each COMPLETED sample is
judged on its own; in batch mode (``enable_batch_judge=True``) the group is judged in one
``batch_judge`` call, and only when every sample COMPLETED. A pause (:meth:`SingleTurnAgentLoop.pause`)
while generating or judging gives the work ``pause_grace_s`` seconds (10 by default, as XTuner),
then cancels it and marks the unfinished samples ABORTED with ``finish_reason="abort"`` and no
reward; the trainer's data preparation then skips the group.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from judger.core.errors import GenerationError
from judger.core.judger import BaseJudger
from judger.core.rollout import RolloutState, Status
from judger.runtime.http import HttpClient
from judger.trainer.controller import RolloutController, choice_problem, parse_choice
from judger.trainer.sample_params import SampleParams, as_sample_params
from judger.trainer.tokenizer import chat_prompt_text, load_tokenizer

GenerateFn = Callable[[RolloutState], Awaitable[Any]]


class SingleTurnAgentLoopConfig(BaseModel):
    """How a group is generated and judged."""

    model_config = ConfigDict(extra="forbid")

    hf_checkpoint: str | None = Field(
        None,
        description="the policy model: its served name (when model is not set) and, where transformers "
        "can load it from local files, its tokenizer (prompt_ids, chat template, prompt filtering)",
    )
    group_size: int = Field(1, ge=1, description="samples generated per prompt by generate_group")
    enable_batch_judge: bool = Field(
        False, description="judge the whole group in one batch_judge call, only when all samples completed"
    )
    pause_grace_s: float = Field(10.0, ge=0, description="seconds in-flight work may finish after a pause")
    sample_params: SampleParams = Field(
        default_factory=SampleParams,
        description="sampling parameters sent to the endpoint (temperature, top_p, max_tokens, stop, seed, "
        "n, ...): a SampleParams or a dict of its fields",
    )
    model: str | None = Field(
        None, description="endpoint model name; None: hf_checkpoint, else the first of GET /v1/models"
    )
    request_timeout: float = Field(300.0, gt=0, description="seconds for one endpoint request")
    max_retries: int = Field(
        3, ge=0, description="retries of one endpoint request (connection errors, 429, 5xx), with backoff"
    )
    logprobs: bool = Field(True, description="ask the endpoint for token ids and logprobs")

    @field_validator("sample_params", mode="before")
    @classmethod
    def _sample_params(cls, value: Any) -> SampleParams:
        return as_sample_params(value)

    def served_model(self) -> str | None:
        """The model name requests carry: ``model``, else ``hf_checkpoint`` (None: ask the server)."""
        return self.model or self.hf_checkpoint

    def load_tokenizer(self) -> Any:
        """``hf_checkpoint``'s tokenizer when transformers can load it from local files, else None."""

        return load_tokenizer(self.hf_checkpoint)


def _mark_aborted(state: RolloutState) -> None:
    state.status = Status.ABORTED
    state.finish_reason = "abort"
    state.reward = None


async def _until_paused_then_grace(pause: asyncio.Event | None, grace_s: float) -> None:
    if pause is None:
        await asyncio.Event().wait()  # never
        return
    await pause.wait()
    await asyncio.sleep(grace_s)


async def _run_pausable(
    work: dict[int, Awaitable[Any]], pause: asyncio.Event | None, grace_s: float
) -> set[int]:
    """Run ``work`` (key -> awaitable) until done, or a pause plus its grace; the keys cut short.

    A cancellation from outside cancels the work too, and reports every key as cut short by raising.
    """
    tasks: dict[asyncio.Future[Any], int] = {asyncio.ensure_future(aw): key for key, aw in work.items()}
    if not tasks:
        return set()
    stopper = asyncio.ensure_future(_until_paused_then_grace(pause, grace_s))
    pending: set[asyncio.Future[Any]] = set(tasks)
    try:
        while pending:
            done, _ = await asyncio.wait(pending | {stopper}, return_when=asyncio.FIRST_COMPLETED)
            pending -= done
            if stopper in done:
                break
    finally:
        stopper.cancel()
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
    for task in tasks:
        if task.done() and not task.cancelled() and task.exception() is not None and task not in pending:
            raise task.exception()  # type: ignore[misc]
    return {tasks[t] for t in pending}


async def run_judger(
    judger: BaseJudger,
    states: Sequence[RolloutState],
    *,
    enable_batch_judge: bool = False,
    pause: asyncio.Event | None = None,
    pause_grace_s: float = 10.0,
) -> list[RolloutState]:
    """Judge a group as XTuner's agent loop does; returns the same states.

    Single mode: every COMPLETED sample is judged (concurrently), others are left as they are.
    Batch mode: one ``batch_judge`` over the group, only when all samples are COMPLETED.
    When ``pause`` is set, judging gets ``pause_grace_s`` more seconds; then it is cancelled and
    the samples not yet judged become ABORTED (``finish_reason="abort"``, ``reward=None``).
    """
    states = list(states)
    if enable_batch_judge:
        if not states or any(s.status != Status.COMPLETED for s in states):
            return states
        work: dict[int, Awaitable[Any]] = {-1: judger.batch_judge(states)}
    else:
        work = {i: judger.judge(s) for i, s in enumerate(states) if s.status == Status.COMPLETED}
    try:
        cut = await _run_pausable(work, pause, pause_grace_s)
    except asyncio.CancelledError:
        for i, s in enumerate(states):
            if (i in work or -1 in work) and s.reward is None:
                _mark_aborted(s)
        raise
    for key in cut:
        for s in states if key == -1 else [states[key]]:
            _mark_aborted(s)
    return states


# --- generation ------------------------------------------------------------------------------------


def render_messages(messages: Sequence[dict[str, Any]]) -> str:
    """A plain-text prompt: each message's content on its own line.

    This is not a chat template; pass ``render_prompt=tokenizer.apply_chat_template``-style
    functions to :class:`OpenAICompletionsGenerator` for a real model.
    """
    return "\n".join(str(m.get("content") or "") for m in messages)


_NO_TEMPLATE = (
    "SingleTurnAgentLoop(config, URL) sends each prompt to /v1/completions under the policy's chat "
    "template, and {where}: set hf_checkpoint to the policy's local model folder, or pass render_prompt= "
    "(render_messages sends each message's content on its own line, untemplated: an instruct model "
    "often answers such a prompt with nothing)"
)


def _tokenizer_source(config: SingleTurnAgentLoopConfig) -> str:
    if not config.hf_checkpoint:
        return "no hf_checkpoint is set"
    return f"hf_checkpoint={config.hf_checkpoint!r} gives no local tokenizer with a chat template"


def _chat_template_of(config: SingleTurnAgentLoopConfig) -> Callable[[Sequence[dict[str, Any]]], str] | None:
    """``hf_checkpoint``'s chat template as a prompt renderer, when its tokenizer loads locally."""
    tokenizer = config.load_tokenizer()
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        return None
    return lambda messages: chat_prompt_text(tokenizer, messages)


class OpenAICompletionsGenerator:
    """``generate(state)`` over an OpenAI-compatible ``/v1/completions`` endpoint.

    Reads ``choices[0].text`` and ``finish_reason``; with ``logprobs`` on, asks for the sampled
    token ids (vLLM's ``return_token_ids`` / ``return_tokens_as_token_ids``) and keeps them with
    ``logprobs.token_logprobs``. A reply without the ids fails the sample, naming why: ids made by
    re-tokenizing the text are not the tokens the server sampled, and a trainer would learn from
    tokens the policy never produced. ``tokenize`` (text -> ids), when given, fills only
    ``prompt_ids`` the server did not return.
    """

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        sample_params: SampleParams | dict[str, Any] | None = None,
        logprobs: bool = True,
        request_timeout: float = 300.0,
        max_retries: int = 3,
        render_prompt: Callable[[Sequence[dict[str, Any]]], str] = render_messages,
        tokenize: Callable[[str], list[int]] | None = None,
    ) -> None:
        base = base_url.rstrip("/")
        for suffix in ("/v1/completions", "/v1"):
            if base.endswith(suffix):
                base = base[: -len(suffix)]
        self.base_url = base
        self.model = model
        self.sample_params = as_sample_params(sample_params).to_body()
        self.logprobs = logprobs
        self.render_prompt = render_prompt
        self.tokenize = tokenize
        self._http = HttpClient(timeout=request_timeout, max_retries=max_retries)
        self._model_lock: asyncio.Lock | None = None

    async def _model(self) -> str:
        if self.model is not None:
            return self.model
        if self._model_lock is None:
            self._model_lock = asyncio.Lock()
        async with self._model_lock:
            if self.model is None:
                reply = await self._http.request_json("GET", f"{self.base_url}/v1/models")
                try:
                    self.model = str(reply["data"][0]["id"])
                except (KeyError, IndexError, TypeError):
                    raise ValueError(f"{self.base_url}/v1/models lists no model: {reply!r:.200}") from None
        return self.model

    async def __call__(self, state: RolloutState) -> dict[str, Any]:
        prompt = self.render_prompt(state.message)
        body: dict[str, Any] = {"model": await self._model(), "prompt": prompt, **self.sample_params}
        if self.logprobs:
            body.setdefault("logprobs", 1)
            body.setdefault("return_token_ids", True)
            body.setdefault("return_tokens_as_token_ids", True)
        reply = await self._http.post_json(f"{self.base_url}/v1/completions", body)
        try:
            choice = reply["choices"][0]
        except (KeyError, IndexError, TypeError):
            raise ValueError(
                f"{self.base_url}/v1/completions replied without choices: {reply!r:.200}"
            ) from None
        out = parse_choice(choice, "completions")
        problem = choice_problem(out)
        if problem is not None:  # never coerced: int("7"), int(True) or int(3.5) would hide it
            raise ValueError(f"{self.base_url}/v1/completions: invalid generation: {problem}")
        if self.logprobs and "response_ids" not in out:
            raise GenerationError(
                f"{self.base_url} returned no token ids for the response (asked with return_token_ids "
                "and return_tokens_as_token_ids, as vLLM >= 0.10.2 answers them); re-tokenizing the "
                "text would not give the tokens it sampled: use such a server, or logprobs=False "
                "for text only"
            )
        if state.prompt_ids is None and "prompt_ids" not in out and self.tokenize is not None:
            out["prompt_ids"] = self.tokenize(prompt)
        if state.prompt_ids is not None:
            out.pop("prompt_ids", None)  # given prompt ids are kept
        return out

    async def aclose(self) -> None:
        await self._http.aclose()


class SingleTurnAgentLoop:
    """Generate a group of responses for one prompt and judge them (see the module docstring)."""

    def __init__(
        self,
        config: SingleTurnAgentLoopConfig,
        generate: GenerateFn | str | RolloutController,
        judger: BaseJudger | None = None,
        *,
        tokenize: Callable[[str], list[int]] | None = None,
        render_prompt: Callable[[Sequence[dict[str, Any]]], str] | None = None,
    ) -> None:

        self.config = config
        self.judger = judger
        self.controller: RolloutController | None = None
        self.timings = {"generate_s": 0.0, "judge_s": 0.0}
        if isinstance(generate, RolloutController):
            self.controller = generate
            if generate.model is None:
                generate.model = config.served_model()
        elif isinstance(generate, str):
            if render_prompt is None:
                render_prompt = _chat_template_of(config)
            if render_prompt is None:
                raise ValueError(_NO_TEMPLATE.format(where=_tokenizer_source(config)))
            generate = OpenAICompletionsGenerator(
                generate,
                model=config.served_model(),
                sample_params=config.sample_params,
                logprobs=config.logprobs,
                request_timeout=config.request_timeout,
                max_retries=config.max_retries,
                render_prompt=render_prompt,
                tokenize=tokenize,
            )
        if self.controller is None and not callable(generate):
            raise TypeError(
                "generate must be a RolloutController, an async callable or an endpoint URL, "
                f"got {type(generate).__name__}"
            )
        self.generate = generate
        self._pause = asyncio.Event()

    # --- pause / resume --------------------------------------------------------------------------

    def pause(self) -> None:
        """Stop in-flight work after the grace period; its samples become ABORTED."""
        self._pause.set()

    def resume(self) -> None:
        self._pause.clear()

    @property
    def paused(self) -> bool:
        return self._pause.is_set()

    # --- generation ------------------------------------------------------------------------------

    async def generate_sample(self, state: RolloutState) -> RolloutState:
        """One response for ``state``: status from the finish reason, FAILED when generation raised."""
        try:
            generate = self.generate
            if not callable(generate):  # a RolloutController: it runs whole groups (generate_group)
                raise TypeError(f"'{type(generate).__name__}' object is not callable")
            result = await generate(state)
        except Exception as exc:
            state.status = Status.FAILED
            state.error_msg = f"{type(exc).__name__}: {exc}"
            state.extra_fields["generation_failure"] = state.error_msg
            return state
        if isinstance(result, RolloutState) and result is not state:
            state.__dict__.update(result.__dict__)
        elif isinstance(result, dict):
            unknown = set(result) - set(RolloutState.model_fields)
            if unknown:
                state.status = Status.FAILED
                state.error_msg = f"generate returned unknown fields {sorted(unknown)}"
                return state
            for key, value in result.items():
                if key == "extra_fields":
                    state.extra_fields.update(value)
                else:
                    setattr(state, key, Status(value) if key == "status" else value)
        if state.status == Status.INIT:
            state.status = Status.from_finish_reason(state.finish_reason)
            if state.status == Status.FAILED and state.error_msg is None:
                state.error_msg = f"generation ended with finish_reason={state.finish_reason!r}"
                state.extra_fields["generation_failure"] = state.error_msg
        return state

    def _copies(self, prompt: RolloutState | Sequence[RolloutState]) -> list[RolloutState]:
        if isinstance(prompt, RolloutState):
            # shallow copies: the prompt is shared read-only, what a sample writes is its own
            return [
                prompt.model_copy(
                    update={"message": list(prompt.message), "extra_fields": dict(prompt.extra_fields)}
                )
                for _ in range(self.config.group_size)
            ]
        return list(prompt)

    async def generate_group(self, prompt: RolloutState | Sequence[RolloutState]) -> list[RolloutState]:
        """Generate ``config.group_size`` samples of ``prompt`` (or one per given state), then judge them."""
        states = self._copies(prompt)
        started = time.perf_counter()
        work: dict[int, Awaitable[Any]]
        if self.controller is not None:
            work = {-1: self.controller.generate_group(states, self.config.sample_params)}
        else:
            work = {i: self.generate_sample(s) for i, s in enumerate(states)}
        try:
            cut = await _run_pausable(work, self._pause, self.config.pause_grace_s)
        except asyncio.CancelledError:
            for s in states:
                if s.status == Status.INIT:
                    _mark_aborted(s)
            raise
        for i in cut:
            for s in states if i == -1 else [states[i]]:
                if s.status == Status.INIT:
                    _mark_aborted(s)
        judging = time.perf_counter()
        self.timings["generate_s"] += judging - started
        if self.judger is not None:
            await run_judger(
                self.judger,
                states,
                enable_batch_judge=self.config.enable_batch_judge,
                pause=self._pause,
                pause_grace_s=self.config.pause_grace_s,
            )
            self.timings["judge_s"] += time.perf_counter() - judging
        return states

    async def aclose(self) -> None:
        """Close the generator this loop made from a URL (a controller passed in is its owner's)."""
        if self.controller is not None:
            return
        closer = getattr(self.generate, "aclose", None)
        if closer is not None:
            with contextlib.suppress(Exception):
                await closer()
