"""Parsed request bodies -> RolloutStates, checked field by field with messages that name the field.

Light by design: the server checks the few fields each protocol carries itself and builds states with
``model_construct`` where every field was checked here (``/reward``, ``/get_reward``); ``/judge``
states are validated by RolloutState after the checks that keep validation linear and keep
client-chosen telemetry out (a posted ``status``, ``reward``, ``error_msg`` or ``judge_failure`` is
refused: those are the server's to write).
"""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import ValidationError

from judger.core.rollout import RolloutState, Status
from judger.server.body import BodyError, echo

# at most this many validation errors are reported, each without the offending input
MAX_ERRORS = 10
_JUDGEABLE = (None, Status.INIT.value, Status.COMPLETED.value)
_SERVER_WRITTEN = ("reward", "error_msg")


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BodyError(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value


def _data_source(value: Any, where: str) -> str | dict[str, Any] | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict) and all(isinstance(v, (int, float)) for v in value.values()):
        return value
    raise BodyError(f"{where}: expected a string, an object of weights, or null")


def _string_list(value: Any, where: str, *, nullable: bool = False) -> list[Any]:
    if not isinstance(value, list):
        raise BodyError(f"{where}: expected a list, got {type(value).__name__}")
    for i, item in enumerate(value):
        if not (isinstance(item, str) or (nullable and item is None)):
            raise BodyError(f"{where}[{i}]: expected a string, got {type(item).__name__}")
    return value


def reward_state(body: Any) -> RolloutState:
    """``/reward``: ``{"response", "label", "extra_info", "data_source"}`` -> one state."""
    body = _object(body, "body")
    unknown = body.keys() - {"response", "label", "extra_info", "data_source"}
    if unknown:
        names = ", ".join(echo(k) for k in sorted(unknown)[:5])
        raise BodyError(f"body: unknown field(s) {names}; allowed: response, label, extra_info, data_source")
    if "response" not in body:
        raise BodyError("response: Field required (the model's response text, or null)")
    response = body["response"]
    if response is not None and not isinstance(response, str):
        raise BodyError(f"response: expected a string or null, got {type(response).__name__}")
    extra_info = body.get("extra_info") or {}
    extra_info = _object(extra_info, "extra_info")
    question = extra_info.get("question", extra_info.get("prompt"))
    return RolloutState.model_construct(
        message=[{"role": "user", "content": question}] if isinstance(question, str) else [],
        response=response,
        reward_model={"ground_truth": body.get("label")},
        data_source=_data_source(body.get("data_source"), "data_source"),
        status=Status.COMPLETED,
        extra_fields={"extra_info": extra_info} if extra_info else {},
    )


def _judge_state(item: Any, where: str) -> RolloutState:
    item = _object(item, where)
    fields = RolloutState.model_fields
    unknown = item.keys() - fields.keys()
    if unknown:
        hints = []
        for name in sorted(unknown)[:5]:  # at most 5 did-you-mean searches, whatever was posted
            close = difflib.get_close_matches(name[:64], list(fields), n=1)
            hints.append(echo(name) + (f" (did you mean {close[0]!r}?)" if close else ""))
        names = ", ".join(hints)
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise BodyError(
            f"{where}: RolloutState has no field {names}{more}; put task-specific data in extra_fields"
        )
    for name in _SERVER_WRITTEN:
        if item.get(name) is not None:
            raise BodyError(f"{where}.{name}: written by the judger; post it as null or leave it out")
    if item.get("status") not in _JUDGEABLE:
        raise BodyError(
            f"{where}.status: {echo(item['status'])} cannot be judged; post 'completed' or leave it out"
        )
    extra = item.get("extra_fields")
    if isinstance(extra, dict) and "judge_failure" in extra:
        raise BodyError(f"{where}.extra_fields.judge_failure: written by the judger; leave it out")
    try:
        state = RolloutState.model_validate(item)
    except ValidationError as exc:
        raise BodyError(validation_message(exc, where)) from None
    state.status = Status.COMPLETED  # posted to be judged: a finished rollout
    return state


def judge_states(body: Any) -> tuple[list[RolloutState], bool]:
    """``/judge``: one RolloutState object or a list of them -> (states, whether a list was posted)."""
    if isinstance(body, list):
        return [_judge_state(item, f"[{i}]") for i, item in enumerate(body)], True
    return [_judge_state(body, "body")], False


def get_reward_states(body: Any) -> list[RolloutState]:
    """OpenRLHF's ``/get_reward``: ``{"query", "prompts", "labels", "data_sources"}`` -> states.

    The response is what follows the prompt in the query. OpenRLHF sends ``""`` for a sample
    without a label; it reaches the judger as a missing label (None), as it would through
    ``/reward``, so a judger that needs one fails that sample with its own message.
    """
    body = _object(body, "body")
    if "query" not in body:
        raise BodyError("query: Field required (a list of prompt + response texts)")
    queries = _string_list(body["query"], "query")
    n = len(queries)
    columns: dict[str, list[Any]] = {}
    for name in ("prompts", "labels", "data_sources"):
        value = body.get(name)
        if value is None:
            continue
        if not isinstance(value, list):
            raise BodyError(f"{name}: expected a list, got {type(value).__name__}")
        if len(value) != n:
            raise BodyError(f"{name} has {len(value)} items but query has {n}; they must match")
        columns[name] = value
    prompts = _string_list(columns["prompts"], "prompts", nullable=True) if "prompts" in columns else None
    labels = columns.get("labels")
    sources = columns.get("data_sources")
    states = []
    for i, query in enumerate(queries):
        prompt = prompts[i] if prompts else None
        response = query[len(prompt) :] if prompt and query.startswith(prompt) else query
        label = labels[i] if labels is not None else None
        states.append(
            RolloutState.model_construct(
                message=[{"role": "user", "content": prompt}] if prompt else [],
                response=response,
                reward_model={"ground_truth": None if label == "" else label},
                data_source=_data_source(sources[i], f"data_sources[{i}]") if sources else None,
                status=Status.COMPLETED,
            )
        )
    return states


def validation_message(exc: ValidationError, where: str) -> str:
    """pydantic's errors as ``field: message`` pairs, a bounded number, without the inputs."""
    parts = []
    for error in exc.errors(include_input=False, include_url=False)[:MAX_ERRORS]:
        loc = ".".join(str(p) for p in error.get("loc", ()))
        msg = str(error.get("msg", ""))
        parts.append(f"{where}{'.' + loc if loc else ''}: {msg[:200]}")
    if exc.error_count() > MAX_ERRORS:
        parts.append(f"... and {exc.error_count() - MAX_ERRORS} more")
    return "; ".join(parts)
