"""OpenRLHF's ``/get_reward`` queries read as OpenRLHF writes them.

OpenRLHF sends ``query`` = its tokenizer's ``decode(prompt_ids + response_ids,
skip_special_tokens=False)``, the ``prompts`` it generated from, and ``labels`` (never
``data_sources``). So the response is what follows the prompt in the query, and it still ends
with the tokenizer's end-of-turn text (``<|im_end|>``, then padding such as ``<|endoftext|>``),
which a scorer reading the end of the response (DAPO's ``Answer:`` line) takes as part of the
answer. :class:`GetRewardReader`:

- strips the end markers from the end of each response, as ``decode(skip_special_tokens=True)``
  would: those of a tokenizer directory (:func:`special_token_texts`, no ``transformers`` needed),
  those given (``--strip-text``), or by default the end markers of the common chat templates
  (:data:`DEFAULT_END_MARKERS`). Only from the end: generation stops at the end-of-turn token, so
  the same text anywhere else is text the policy wrote (as ordinary tokens, which
  ``skip_special_tokens`` keeps too), and it is judged as written. Removed there, it would join
  what it separates (``Answer: 4<|im_end|>2`` would read ``Answer: 42``); cut there, it would hide
  from the grader what follows it;
- fails a query that does not start with its prompt (OpenRLHF truncates long prompts from the
  left; some tokenizers do not round-trip): judging it whole would judge the prompt as part of the
  answer, and a few-shot prompt holds answers;
- gives every query without a data source ``data_source`` (a routing judger needs one; refused at
  start-up by :func:`check_routing` when it has none).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judger.core.errors import JudgerError
from judger.core.failure import JudgeFailure, mark_failed
from judger.core.judger import BaseJudger
from judger.core.rollout import RolloutState, Status
from judger.judgers.composed import ComposedJudger

PROMPT_NOT_FOUND = (
    "the query does not start with its prompt (OpenRLHF truncated the prompt from the left, or the "
    "tokenizer does not decode it back as sent): the response cannot be told apart from the prompt, and "
    "judging the whole query would judge the prompt as part of the answer"
)
TOKENIZER_FILES = ("tokenizer_config.json", "special_tokens_map.json", "tokenizer.json")
DEFAULT_END_MARKERS = (
    "<|im_end|>",  # ChatML: Qwen, Yi, InternLM
    "<|endoftext|>",  # Qwen's and GPT-2's end of text and padding, Phi
    "<|eot_id|>",  # Llama 3
    "<|eom_id|>",  # Llama 3.1, a turn that ends in a tool call
    "<|end_of_text|>",  # Llama 3's end of text and padding
    "</s>",  # Llama 2, Mistral
    "<end_of_turn>",  # Gemma
    "<eos>",  # Gemma
    "<|end|>",  # Phi-3
    "<|return|>",  # gpt-oss
    "<｜end▁of▁sentence｜>",  # DeepSeek
)
"""The end-of-turn and end-of-text texts of the common chat templates: what ``/get_reward`` strips
from the end of a response when the server is told neither the policy's tokenizer nor its texts."""
_NAMED_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


def _content(token: Any) -> str | None:
    if isinstance(token, str):
        return token
    if isinstance(token, dict) and isinstance(token.get("content"), str):
        return token["content"]
    return None


def special_token_texts(directory: str | Path) -> tuple[str, ...]:
    """The text of every special token a Hugging Face tokenizer directory defines: its named tokens
    (``eos_token`` ...), ``additional_special_tokens``, and the added tokens marked ``special``.
    These are what ``decode(..., skip_special_tokens=True)`` leaves out."""
    root = Path(directory)
    found = [root / name for name in TOKENIZER_FILES if (root / name).is_file()]
    if not found:
        raise FileNotFoundError(
            f"--tokenizer {str(directory)!r}: none of {list(TOKENIZER_FILES)} there; give the tokenizer "
            "directory OpenRLHF loads (its --pretrain), or the texts with --strip-text"
        )
    texts: list[str] = []
    for path in found:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            continue
        for name in _NAMED_TOKENS:
            texts.append(_content(data.get(name)) or "")
        for token in data.get("additional_special_tokens") or ():
            texts.append(_content(token) or "")
        decoder = data.get("added_tokens_decoder")
        if isinstance(decoder, dict):
            texts.extend(
                _content(t) or "" for t in decoder.values() if isinstance(t, dict) and t.get("special")
            )
        for token in data.get("added_tokens") or ():
            if isinstance(token, dict) and token.get("special"):
                texts.append(_content(token) or "")
    return tuple(sorted({t for t in texts if t}, key=lambda t: (-len(t), t)))


def strip_texts(text: str, texts: Sequence[str]) -> str:
    """``text`` without any occurrence of ``texts`` (longest first, so a token containing another
    goes whole)."""
    for token in texts:
        if token in text:
            text = text.replace(token, "")
    return text


def strip_end_markers(text: str, markers: Sequence[str]) -> str:
    """``text`` without the run of ``markers`` (and the whitespace between them) that ends it; a
    marker anywhere else stays, as text. Unchanged when it ends with none."""
    cut = len(text)
    while True:
        body = text[:cut].rstrip()
        marker = next((m for m in markers if m and body.endswith(m)), None)
        if marker is None:
            return text if cut == len(text) else text[:cut]
        cut = len(body) - len(marker)


@dataclass(frozen=True)
class GetRewardReader:
    """How ``/get_reward`` turns a query into a response (see the module docstring)."""

    strip: tuple[str, ...] = tuple(sorted(DEFAULT_END_MARKERS, key=lambda t: (-len(t), t)))
    """The end markers stripped from the end of each response (longest first)."""
    data_source: str | None = None
    data_sources_sent: bool = True
    """Whether the client sends ``data_sources`` (OpenRLHF does not; ``judger serve`` assumes so)."""
    markers_from: str = "the end markers of the common chat templates"
    """Where ``strip`` came from, for the start-up message."""

    @classmethod
    def build(
        cls,
        tokenizer: str | Path | None = None,
        strip: Sequence[str] = (),
        data_source: str | None = None,
        data_sources_sent: bool = True,
    ) -> GetRewardReader:
        texts = set(special_token_texts(tokenizer)) if tokenizer else set()
        texts.update(t for t in strip if t)
        if not texts:
            return cls(data_source=data_source, data_sources_sent=data_sources_sent)
        named = [f"the special tokens of {tokenizer}"] if tokenizer else []
        named += ["--strip-text"] if any(strip) else []
        markers = tuple(sorted(texts, key=lambda t: (-len(t), t)))
        return cls(markers, data_source, data_sources_sent, " and ".join(named))

    def describe(self) -> str:
        """Which end markers ``/get_reward`` strips, said when the server starts."""
        shown = ", ".join(self.strip) if self.strip else "none"
        return f"/get_reward strips {self.markers_from} from the end of each response: {shown}"

    def check(self, judger: BaseJudger) -> None:
        """Refuse, at start-up, a routing judger whose ``/get_reward`` queries could not be routed:
        without ``data_sources`` every sample would fail at run time."""
        if not isinstance(judger, ComposedJudger):
            return
        if self.data_source is not None:
            try:
                judger.route(self.data_source)
            except (NotImplementedError, JudgerError) as exc:  # an unknown branch: refused now
                raise ValueError(f"--data-source {self.data_source!r}: {exc}") from None
            return
        if not self.data_sources_sent:
            raise ValueError(
                f"judger {judger.get_judger_name()!r} routes each sample by its data_source, which "
                "OpenRLHF's /get_reward requests never carry: every sample would fail. Serve one preset "
                "(--preset), or give the data_source of every /get_reward query (--data-source NAME), or, "
                "if your client sends data_sources, say so (--data-sources-sent)"
            )

    def response(self, query: str, prompt: str | None) -> str | None:
        """The response part of ``query``, stripped; None when the prompt is not found in it."""
        if prompt:
            if query.startswith(prompt):
                query = query[len(prompt) :]
            else:
                # the decoded query may lead with special-token text the prompt lacks (a BOS)
                at = query.find(prompt)
                if at <= 0 or not self.strip or strip_texts(query[:at], self.strip).strip():
                    return None
                query = query[at + len(prompt) :]
        return strip_end_markers(query, self.strip) if self.strip else query

    def state(self, query: str, prompt: str | None, label: Any, data_source: Any) -> RolloutState:
        response = self.response(query, prompt)
        state = RolloutState(
            message=[{"role": "user", "content": prompt}] if prompt else [],
            response=query if response is None else response,
            reward_model={"ground_truth": None if label == "" else label},
            data_source=data_source if data_source is not None else self.data_source,
            status=Status.COMPLETED,
        )
        if response is None:
            mark_failed(state, JudgeFailure(judger="get_reward", kind="error", message=PROMPT_NOT_FOUND))
        return state


async def judge_readable(
    states: list[RolloutState], judge: Callable[[list[RolloutState]], Awaitable[list[RolloutState]]]
) -> list[RolloutState]:
    """Judge the states whose query could be read; the others stay FAILED with their reason."""
    unread = [s.status is Status.FAILED for s in states]
    if not any(unread):
        return await judge(states)
    readable = [s for s, failed in zip(states, unread) if not failed]
    judged = iter(await judge(readable)) if readable else iter(())
    return [s if failed else next(judged) for s, failed in zip(states, unread)]
