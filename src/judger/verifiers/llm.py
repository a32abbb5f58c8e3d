"""LLMJudger: grade a response by asking an OpenAI-compatible model, and its config."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from pydantic import Field, field_validator, model_validator

from judger.core.deadlines import judge_deadline
from judger.core.errors import NoResponseError
from judger.core.judger import (
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_TIMEOUT,
    BatchJudger,
    JudgerOutput,
    JudgerPayload,
    OnError,
    gather_bounded,
)
from judger.core.outputs import check_output
from judger.core.rollout import RolloutState, Status
from judger.judgers.config import JudgerConfig
from judger.verifiers.hosts import ChatHosts
from judger.verifiers.prompts import GRADER_PROMPT, check_template, defang, render_prompt
from judger.verifiers.truncation import STRIP_TOKENS, cut_response
from judger.verifiers.verdicts import VerdictParseError, VerdictParser, read_with, resolve_parser

DEFAULT_VERDICT_SCORES: dict[str, float] = {"A": 1.0, "B": -1.0, "C": -1.0}
DEFAULT_VERDICT_NAMES: dict[str, str] = {"A": "correct", "B": "incorrect", "C": "invalid"}
SKIPPED = "skipped"
DEFAULT_GRADER_REPLY_BYTES = 16 * 2**20  # a verdict, or a reasoning grader's few thousand tokens


def _text_of(content: Any) -> str:
    """A message's text: a string as is; the text parts of a multimodal content list, joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "\n".join(p for p in parts if isinstance(p, str))
    return str(content)


class LLMJudger(BatchJudger):
    """Ask a grader model whether ``response`` answers ``question`` as ``label`` does.

    The reply is read by ``verdict_parser`` into a verdict key (e.g. "A"), which ``verdict_scores``
    maps to the score and ``verdict_names`` to the recorded verdict ("correct", "incorrect",
    "invalid"). A reply with no verdict, or a verdict with no score, raises
    :class:`~judger.verifiers.verdicts.VerdictParseError`: a judge failure, never a silent score.

    A sample whose status is not COMPLETED (nor INIT, the default of a state built by hand) is not
    sent to the grader: it scores ``skip_score`` with ``verdict="skipped"`` and ``skip_reason``
    saying why (as XTuner). A completed sample whose response is None FAILS with
    :class:`~judger.core.errors.NoResponseError`, as the rule presets fail it: a missing answer is
    not a wrong one.

    Every reward holds ``score``, ``acc`` (the verdict is in ``correct_verdicts``), ``verdict`` and
    ``judge_reply`` (the grader's raw text).
    """

    def __init__(
        self,
        judger_name: str = "llm_judger",
        *,
        hosts: list[str],
        prompt_template: str = GRADER_PROMPT,
        system_prompt: str | None = None,
        verdict_parser: VerdictParser | str | None = None,
        verdict_pattern: str | None = None,
        verdict_scores: dict[str, float] | None = None,
        verdict_names: dict[str, str] | None = None,
        correct_verdicts: Sequence[str] = ("A",),
        skip_score: float = -1.0,
        model: str | None = None,
        api_key: str | None = None,
        request_timeout: float = 30.0,
        max_retries: int = 3,
        retry_backoff: float = 0.2,
        sampling_params: dict[str, Any] | None = None,
        finish_words: Sequence[str] = (),
        max_response_lines: int | None = None,
        max_response_chars: int | None = None,
        on_error: OnError = "fail",
        timeout: float = DEFAULT_TIMEOUT,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        dedup: bool = True,
        max_reply_bytes: int = DEFAULT_GRADER_REPLY_BYTES,
    ) -> None:
        super().__init__(judger_name, on_error=on_error, timeout=timeout, max_concurrency=max_concurrency)
        self.dedup = dedup
        self.prompt_template = check_template(prompt_template)
        self.system_prompt = system_prompt
        self.verdict_scores = dict(verdict_scores if verdict_scores is not None else DEFAULT_VERDICT_SCORES)
        self.parse_verdict = resolve_parser(verdict_parser, verdict_pattern, keys=self.verdict_scores)
        self.verdict_names = dict(verdict_names if verdict_names is not None else DEFAULT_VERDICT_NAMES)
        self.correct_verdicts = frozenset(correct_verdicts)
        self.skip_score = float(skip_score)
        self.lowest_score = min([self.skip_score, *self.verdict_scores.values()])
        self.sampling_params = {"temperature": 0.0, **(sampling_params or {})}
        self.finish_words = tuple(finish_words)
        self.max_response_lines = max_response_lines
        self.max_response_chars = max_response_chars
        # no network here: model names are looked up on the first request, in the event loop
        self.pool = ChatHosts(
            hosts,
            model=model,
            api_key=api_key,
            timeout=request_timeout,
            max_retries=max_retries,
            backoff_base=retry_backoff,
            max_concurrency=max_concurrency,
            max_reply_bytes=max_reply_bytes,
        )

    # --- payload contract ------------------------------------------------------------------------

    def preprocess(self, rollout_state: RolloutState) -> JudgerPayload:
        message = rollout_state.message
        return {
            "question": _text_of(message[-1].get("content")) if message else "",
            "response": rollout_state.response,
            "label": rollout_state.ground_truth,
            "status": rollout_state.status.value,
        }

    def build_messages(self, payload: JudgerPayload) -> list[dict[str, str]]:
        """The chat messages sent to the grader for ``payload``."""
        response = cut_response(
            payload.get("response") or "",
            self.finish_words,
            self.max_response_lines,
            self.max_response_chars,
            STRIP_TOKENS,
        )
        label = payload.get("label")
        prompt = render_prompt(
            self.prompt_template,
            question=defang(payload.get("question") or ""),
            gold_answer="" if label is None else str(label),
            response=defang(response),
        )
        messages = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        messages.append({"role": "user", "content": prompt})
        return messages

    def skip_reason(self, payload: JudgerPayload) -> str | None:
        status = Status(payload.get("status", Status.COMPLETED))
        # INIT is the default of a state built by hand: it says nothing about the rollout, and the
        # rule presets judge such a state, so the grader does too
        if status not in (Status.COMPLETED, Status.INIT):
            return f"status is {status.value}, not completed"
        return None

    async def _judge_batch(self, payloads: list[JudgerPayload]) -> list[Any]:
        """One request per payload (the base class has merged identical prompts), each under its
        own deadline.

        Samples of a GRPO group often end in the same answer; after cutting, their prompts are
        identical and the grader (at temperature 0) would answer the same, so they share one
        request (``dedup=False`` turns this off). Per-sample calls, not one batch call: a failed
        batch call would be replayed sample by sample and double the grader's load.
        """
        return await gather_bounded([partial(self._run_one_raw, p) for p in payloads], self.max_concurrency)

    async def run_payload(self, payload: JudgerPayload) -> JudgerOutput:
        async with judge_deadline(self.judger_name, self.timeout):
            output = await self._grade(payload)
        return check_output(output, self.judger_name)

    def _dedup_key(self, payload: JudgerPayload) -> Any:
        if not self.dedup or self.skip_reason(payload) is not None or payload.get("response") is None:
            return None
        return tuple(m["content"] for m in self.build_messages(payload))

    async def _grade(self, payload: JudgerPayload) -> JudgerOutput:
        reason = self.skip_reason(payload)
        if reason is not None:
            return {
                "score": self.skip_score,
                "acc": False,
                "verdict": SKIPPED,
                "judge_reply": None,
                "skip_reason": reason,
            }
        if payload.get("response") is None:
            raise NoResponseError()
        messages = self.build_messages(payload)
        reply = await self.pool.chat(messages, **self.sampling_params)
        return self.read_verdict(reply.text, prompt=messages[-1]["content"])

    def read_verdict(self, reply: str, prompt: str = "") -> JudgerOutput:
        """The reward for a grader reply to ``prompt``; raises VerdictParseError, saying which rule
        found no verdict (or which verdicts disagreed), when it holds no known verdict."""
        reading = read_with(self.parse_verdict, reply, prompt)
        key = reading.verdict
        if key is None or key not in self.verdict_scores:
            known = "/".join(self.verdict_scores)
            why = reading.reason if key is None else f"{key!r} is not one of the verdicts {known}"
            raise VerdictParseError(
                f"judger {self.judger_name!r}: no verdict ({known}) in the grader's reply "
                f"{reply[:200]!r}: {why}"
            )
        return {
            "score": float(self.verdict_scores[key]),
            "acc": key in self.correct_verdicts,
            "verdict": self.verdict_names.get(key, key),
            "judge_reply": reply[-200:],  # the verdict is at the end of a long reply
        }

    async def aclose(self) -> None:
        await self.pool.aclose()


class LLMVerifierFields(JudgerConfig):
    """Fields every LLM verifier config shares: where the grader is and how to call it."""

    hosts: list[str] = Field(
        ..., min_length=1, description="OpenAI-compatible servers, e.g. ['10.0.0.5:8000']"
    )
    model: str | None = Field(None, description="model name to request; None: the first id of GET /v1/models")
    api_key: str | None = Field(None, description="sent as 'Authorization: Bearer <api_key>'")
    max_retries: int = Field(
        3, ge=0, description="extra attempts after the first, each on another host if any"
    )
    retry_backoff: float = Field(0.2, ge=0, description="base of the exponential backoff between attempts, s")
    temperature: float = Field(0.0, description="sampling temperature of the grader's requests")
    max_tokens: int | None = Field(None, ge=1, description="tokens the grader may generate")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="extra fields of each chat request")
    skip_score: float = Field(-1.0, description="score of samples not COMPLETED or without a response")
    dedup: bool = Field(True, description="samples with identical grading prompts share one request")
    max_reply_bytes: int = Field(
        DEFAULT_GRADER_REPLY_BYTES,
        ge=1024,
        description="bytes a grader reply may take, on the wire and decoded; a larger one fails the attempt",
    )

    @model_validator(mode="after")
    def _refuse_handler_options(self) -> LLMVerifierFields:
        # inherited from JudgerConfig, but a verifier grades with its LLM: never silently ignore them
        defaults: dict[str, Any] = {
            "reward_handler": None,
            "extra_info": {},
            "batched": None,
            "handler_kwargs": {},
        }
        unused = [name for name, default in defaults.items() if getattr(self, name) != default]
        unused += [name for name in ("num_threads", "execution") if name in self.model_fields_set]
        if unused:
            raise ValueError(
                f"{type(self).__name__}: {unused} are options of a reward_handler judger; an LLM "
                "verifier grades with its model and would ignore them. Remove them"
            )
        return self

    @field_validator("hosts")
    @classmethod
    def _check_hosts(cls, value: list[str]) -> list[str]:
        if any(not isinstance(h, str) or not h.strip() for h in value):
            raise ValueError("every host must be a non-empty string such as '127.0.0.1:8000'")
        return value

    def _sampling(self) -> dict[str, Any]:
        params: dict[str, Any] = {"temperature": self.temperature, **self.extra_body}
        if self.max_tokens is not None:
            params["max_tokens"] = self.max_tokens
        return params

    def _common(self) -> dict[str, Any]:
        return {
            "hosts": list(self.hosts),
            "model": self.model,
            "api_key": self.api_key,
            "request_timeout": self.request_timeout,
            "max_retries": self.max_retries,
            "retry_backoff": self.retry_backoff,
            "sampling_params": self._sampling(),
            "skip_score": self.skip_score,
            "dedup": self.dedup,
            "max_reply_bytes": self.max_reply_bytes,
            "on_error": self.on_error,
            "timeout": self.timeout,
            "max_concurrency": self.max_concurrency,
        }


class LLMJudgerConfig(LLMVerifierFields):
    """Any OpenAI-compatible grader: a user prompt template and a verdict parser.

    ``prompt_template`` may use ``{question}``, ``{gold_answer}`` (or ``{label}``) and
    ``{response}``. The verdict comes from ``verdict_pattern`` (a regex; its first group, or the
    whole match, of its matches outside ``<think>`` reasoning, which must all agree) or
    ``verdict_parser`` (a function ``reply -> key | None`` or its import string); with neither,
    CompassVerifier's A/B/C rules apply (:func:`~judger.verifiers.verdicts.parse_compass_verdict`).
    ``verdict_scores`` maps each key to a score, ``verdict_names`` to the verdict recorded in the
    reward.
    """

    judger_name: str = Field("llm_judger", description="the judger's name (in failures, logs and reports)")
    prompt_template: str = Field(
        GRADER_PROMPT,
        description=(
            "the grader's user prompt: {question}, {gold_answer} (or {label}) and {response} are filled "
            "in; default: CompassVerifier's"
        ),
    )
    system_prompt: str | None = Field(None, description="a system message sent before the prompt; None: none")
    verdict_pattern: str | None = Field(
        None,
        description=(
            "a regex whose first group (or whole match) is the verdict key; its matches outside <think> "
            "must all agree"
        ),
    )
    verdict_parser: Callable[[str], str | None] | str | None = Field(
        None,
        description=(
            "reply -> verdict key or None, or its import string; with neither pattern nor parser, "
            "CompassVerifier's A/B/C rules"
        ),
    )
    verdict_scores: dict[str, float] = Field(
        default_factory=lambda: dict(DEFAULT_VERDICT_SCORES), description="score of each verdict key"
    )
    verdict_names: dict[str, str] = Field(
        default_factory=lambda: dict(DEFAULT_VERDICT_NAMES),
        description="the verdict recorded in the reward for each key",
    )
    correct_verdicts: list[str] = Field(
        default_factory=lambda: ["A"], description="the verdict keys that count as correct (acc)"
    )
    finish_words: list[str] = Field(
        default_factory=list, description="keep only the text after the last of each"
    )
    max_response_lines: int | None = Field(
        None,
        ge=1,
        description="the response is cut to its last this many lines before the grader sees it (None: all)",
    )
    max_response_chars: int | None = Field(
        None, ge=1, description="then to its last this many characters (None: all)"
    )

    @field_validator("prompt_template")
    @classmethod
    def _check_template(cls, value: str) -> str:
        return check_template(value)

    def build_local(self) -> LLMJudger:
        return LLMJudger(
            self.judger_name,
            prompt_template=self.prompt_template,
            system_prompt=self.system_prompt,
            verdict_parser=self.verdict_parser,
            verdict_pattern=self.verdict_pattern,
            verdict_scores=self.verdict_scores,
            verdict_names=self.verdict_names,
            correct_verdicts=self.correct_verdicts,
            finish_words=self.finish_words,
            max_response_lines=self.max_response_lines,
            max_response_chars=self.max_response_chars,
            **self._common(),
        )
