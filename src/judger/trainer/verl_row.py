"""verl's row layout, read once for every reader: ``data_source``, ``prompt`` (chat messages or a
string), ``reward_model.ground_truth``, ``extra_info``, ``uid``.

:func:`read_verl_row` checks those columns and hands back their values;
:func:`judger.trainer.io.parse_row` (rollouts: adds ``response`` / ``responses``) and
:meth:`judger.trainer.sampler.Sampler.parse_row` (prompts) build on it, so a malformed row is
refused with the same message whichever reads it. Nested columns written as JSON text (what
:func:`~judger.trainer.io.write_rollouts` falls back to in Parquet) are decoded here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class VerlRow:
    """The checked verl columns of one row (``extra_info`` None when the row has none)."""

    data_source: Any
    message: list[dict[str, Any]]
    reward_model: dict[str, Any]
    extra_info: dict[str, Any] | None
    uid: Any


def decode_nested(value: Any, opener: str) -> Any:
    """A nested column as written by :func:`~judger.trainer.io.write_rollouts`: JSON text that starts
    with ``opener`` (``"{"`` or ``"[{"``) is decoded; anything else is returned as is."""
    if isinstance(value, str) and value.startswith(opener):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def messages_of(prompt: Any) -> list[dict[str, Any]]:
    """A verl ``prompt`` (chat messages or a string; None: no messages) as chat messages;
    ValueError naming the field."""
    if prompt is None:
        return []
    prompt = decode_nested(prompt, "[{")
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    if hasattr(prompt, "tolist"):  # numpy arrays from pandas-written Parquet
        prompt = prompt.tolist()
    if isinstance(prompt, (list, tuple)) and all(isinstance(m, dict) for m in prompt):
        messages = list(prompt)  # sized exactly: a comprehension over-allocates
        for i, m in enumerate(messages):
            messages[i] = dict(m)
        return messages
    raise ValueError(f"'prompt' must be a list of chat messages or a string, got {type(prompt).__name__}")


def missing_columns(row: dict[str, Any], *, need_prompt: bool, need_response: bool) -> list[str]:
    """The verl columns ``row`` lacks. ``data_source`` may be null (a judger that does not route
    on it); ``reward_model`` and a needed ``prompt`` may not."""
    missing = [] if "data_source" in row else ["data_source"]
    if row.get("reward_model") is None:
        missing.append("reward_model")
    if need_prompt and row.get("prompt") is None:
        missing.append("prompt")
    if need_response and "response" not in row and "responses" not in row:
        missing.append("response (or responses)")
    return missing


def missing_message(missing: list[str]) -> str:
    hint = " (a judger that does not route on it: give --preset or -c)" if "data_source" in missing else ""
    return f"missing column {', '.join(repr(m) for m in missing)}{hint}"


def read_verl_row(row: dict[str, Any], *, need_prompt: bool, need_response: bool = False) -> VerlRow:
    """The verl columns of ``row``; ValueError saying what is wrong (the first thing found).

    ``need_prompt``: a row without a prompt is refused (a sampler's row is nothing but its prompt);
    otherwise it has no messages. ``need_response``: the row must also hold ``response`` or
    ``responses`` (checked with the other columns, so one message names everything missing).
    """
    missing = missing_columns(row, need_prompt=need_prompt, need_response=need_response)
    if missing:
        raise ValueError(missing_message(missing))
    reward_model = decode_nested(row["reward_model"], "{")
    if not isinstance(reward_model, dict) or "ground_truth" not in reward_model:
        raise ValueError("'reward_model' must be an object with a 'ground_truth' key")
    extra_info = decode_nested(row.get("extra_info"), "{")
    if extra_info is not None and not isinstance(extra_info, dict):
        raise ValueError(f"'extra_info' must be an object, got {type(extra_info).__name__}")
    return VerlRow(
        data_source=row["data_source"],
        message=messages_of(row.get("prompt")),
        reward_model=reward_model,
        extra_info=extra_info,
        uid=row.get("uid"),
    )
