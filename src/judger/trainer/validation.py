"""What a model server sent, checked before it can reach training data.

Every token id must be a plain int in ``[0, vocab_size)``, every logprob a finite number <= 0, one
logprob per response token, and the text must be encodable as UTF-8 (a lone surrogate would stop a
JSONL sink) without NUL characters (no tokenizer emits one; they come from a broken or hostile
server). All the values are checked, not a sample of them: the type pass runs in C
(``set(map(type, ...))``) and the range pass in NumPy, well under a millisecond for 32k tokens.

A sample that fails is FAILED with the reason (:func:`fail_invalid`), never trained on.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from judger.core.rollout import RolloutState, Status

MAX_TOKEN_ID = 2**31 - 1
"""The bound on ids when the vocabulary size is not known: what an int32 token tensor holds."""

_INT = {int}
_NUMBER = {int, float}


def token_ids_problem(ids: Any, what: str, vocab_size: int | None = None) -> str | None:
    """Why ``ids`` is not a list of token ids below ``vocab_size`` (or MAX_TOKEN_ID), or None."""
    if not isinstance(ids, (list, tuple)):
        return f"{what} is a {type(ids).__name__}, not a list of ints"
    if not ids:
        return None
    kinds = set(map(type, ids))
    if not kinds <= _INT:  # bool is not int here: type(True) is bool
        bad = next(x for x in ids if type(x) is not int)
        return f"{what} holds {bad!r:.40} ({type(bad).__name__}), not only ints"
    try:
        array = np.fromiter(ids, dtype=np.int64, count=len(ids))
    except OverflowError:
        return f"{what} holds an id beyond 64 bits"
    bound = MAX_TOKEN_ID if vocab_size is None else vocab_size
    low, high = int(array.min()), int(array.max())
    if low < 0:
        return f"{what} holds a negative id ({low})"
    if high >= bound:
        return f"{what} holds id {high}, not below the vocabulary size {bound}"
    return None


def logprobs_problem(logprobs: Any, tokens: int | None) -> str | None:
    """Why ``logprobs`` is not one finite number <= 0 per response token, or None."""
    if not isinstance(logprobs, (list, tuple)):
        return f"logprobs is a {type(logprobs).__name__}, not a list of numbers"
    if tokens is not None and len(logprobs) != tokens:
        return f"{len(logprobs)} logprobs for {tokens} response tokens"
    if not logprobs:
        return None
    if not set(map(type, logprobs)) <= _NUMBER:
        bad = next(x for x in logprobs if type(x) not in _NUMBER)
        return f"logprobs hold {bad!r:.40} ({type(bad).__name__}), not only numbers"
    try:
        array = np.fromiter(logprobs, dtype=np.float64, count=len(logprobs))
    except OverflowError:
        return "logprobs hold a number beyond float range"
    if not np.isfinite(array).all():
        return "logprobs hold a non-finite value (NaN or infinity)"
    if (array > 0.0).any():
        return f"logprobs hold a positive value ({float(array.max())!r}): not a log-probability"
    return None


def text_problem(text: Any, what: str = "response") -> str | None:
    """Why ``text`` cannot be stored and trained on as text, or None."""
    if text is None:
        return None
    if not isinstance(text, str):
        return f"{what} is a {type(text).__name__}, not a string"
    if "\x00" in text:
        return f"{what} holds a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"{what} is not encodable as UTF-8 ({exc.reason} at {exc.start})"
    return None


def generation_problem(
    response: Any,
    prompt_ids: Any = None,
    response_ids: Any = None,
    logprobs: Any = None,
    vocab_size: int | None = None,
) -> str | None:
    """The first reason these generated fields cannot be trained on, or None (None fields pass)."""
    problem = text_problem(response)
    if problem:
        return problem
    if prompt_ids is not None:
        problem = token_ids_problem(prompt_ids, "prompt_ids", vocab_size)
        if problem:
            return problem
    n = None
    if response_ids is not None:
        problem = token_ids_problem(response_ids, "response_ids", vocab_size)
        if problem:
            return problem
        n = len(response_ids)
    if logprobs is not None:
        return logprobs_problem(logprobs, n)
    return None


def sample_problem(state: RolloutState, vocab_size: int | None = None) -> str | None:
    """The first reason ``state``'s generated fields cannot be trained on, or None."""
    return generation_problem(
        state.response, state.prompt_ids, state.response_ids, state.logprobs, vocab_size
    )


def printable(text: str) -> str:
    """``text`` with what a sink cannot write (lone surrogates, NUL) replaced, for a failed sample."""
    return text.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")


def fail_invalid(state: RolloutState, problem: str) -> None:
    """Mark ``state`` FAILED for ``problem`` and drop what it cannot carry to a sink or a trainer."""
    message = f"invalid generation: {problem}"
    state.status = Status.FAILED
    state.reward = None
    state.error_msg = message
    state.extra_fields["generation_failure"] = message
    if isinstance(state.response, str):
        state.response = printable(state.response)
    elif state.response is not None:
        state.response = ""
    # the ids and logprobs that failed are not kept where a trainer could pick them up
    state.response_ids = None
    state.logprobs = None
    if state.prompt_ids is not None and token_ids_problem(state.prompt_ids, "prompt_ids") is not None:
        state.prompt_ids = None
