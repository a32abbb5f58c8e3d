"""Parsed request bodies -> RolloutStates, checked field by field with messages that name the field.

Light by design: the server checks the few fields each protocol carries itself (``/reward``,
``/get_reward``; ``RolloutState(...)`` then costs a few microseconds, where ``model_construct``
costs hundreds); ``/judge`` states are validated by RolloutState after the checks that keep
validation linear and keep client-chosen telemetry out (a posted ``status``, ``reward``,
``error_msg`` or ``judge_failure`` is refused: those are the server's to write).
"""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import TypeAdapter, ValidationError

from judger.core.rollout import RolloutState, Status
from judger.server.body import BodyError, BodyLimits, echo
from judger.server.models import RewardRequest, is_data_source
from judger.server.openrlhf import GetRewardReader
from judger.server.states import twin, validate_json_items

# at most this many validation errors are reported, each without the offending input
MAX_ERRORS = 10
_JUDGEABLE = (None, Status.INIT.value, Status.COMPLETED.value)
_COMPLETED = Status.COMPLETED.value


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BodyError(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value


def _data_source(value: Any, where: str) -> str | dict[str, Any] | None:
    if is_data_source(value):
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
    """``/reward``: ``{"response", "label", "extra_info", "data_source"}`` -> one state
    (:meth:`RewardRequest.parse`: the model that documents the body parses it)."""
    return RewardRequest.parse(body)


SLIME_FIELDS = ("prompt", "response", "label")


def reward_request(body: Any) -> tuple[RolloutState, bool]:
    """``/reward``'s body -> (its state, whether it is slime's ``remote_rm`` body).

    slime POSTs ``{"prompt", "response", "label"}`` (``prompt`` a string or chat messages), which
    no seeds' body has: a body with ``prompt`` is slime's, checked by :func:`slime_state`."""
    if isinstance(body, dict) and "prompt" in body:
        return slime_state(body), True
    return reward_state(body), False


def slime_state(body: dict[str, Any]) -> RolloutState:
    """slime's ``remote_rm`` body: ``{"prompt", "response", "label"}`` -> one state."""
    unknown = body.keys() - set(SLIME_FIELDS)
    if unknown:
        names = ", ".join(echo(k) for k in sorted(unknown)[:5])
        raise BodyError(f"body: unknown field(s) {names}; slime's body has prompt, response, label")
    if "response" not in body:
        raise BodyError("response: Field required (the model's response text, or null)")
    response, prompt = body["response"], body["prompt"]
    if response is not None and not isinstance(response, str):
        raise BodyError(f"response: expected a string or null, got {type(response).__name__}")
    if prompt is None or isinstance(prompt, str):
        message = [{"role": "user", "content": prompt}] if prompt else []
    elif isinstance(prompt, list):
        message = [_object(m, f"prompt[{i}]") for i, m in enumerate(prompt)]
    else:
        raise BodyError(
            f"prompt: expected a string, a list of chat messages or null, got {type(prompt).__name__}"
        )
    return RolloutState(
        message=message,
        response=response,
        reward_model={"ground_truth": body.get("label")},
        status=Status.COMPLETED,
    )


_fields: frozenset[str] = frozenset()
_states: TypeAdapter[list[RolloutState]] | None = None


def _checked_state(item: Any, where: str) -> dict[str, Any]:
    global _fields
    if type(item) is not dict:
        raise BodyError(f"{where}: expected a JSON object, got {type(item).__name__}")
    if not _fields:  # looked up once: model_fields costs microseconds per access
        _fields = frozenset(RolloutState.model_fields)
    if not item.keys() <= _fields:
        _unknown_fields(item, where)
    if item.get("reward") is not None or item.get("error_msg") is not None:
        name = "reward" if item.get("reward") is not None else "error_msg"
        raise BodyError(f"{where}.{name}: written by the judger; post it as null or leave it out")
    status = item.get("status")
    if status is not None and status not in _JUDGEABLE:
        raise BodyError(f"{where}.status: {echo(status)} cannot be judged; post 'completed' or leave it out")
    extra = item.get("extra_fields")
    if extra and type(extra) is dict and "judge_failure" in extra:
        raise BodyError(f"{where}.extra_fields.judge_failure: written by the judger; leave it out")
    item["status"] = _COMPLETED  # posted to be judged: a finished rollout
    return item


def _unknown_fields(item: dict[str, Any], where: str) -> None:
    unknown = item.keys() - _fields
    hints = []
    for name in sorted(unknown)[:5]:  # at most 5 did-you-mean searches, whatever was posted
        close = difflib.get_close_matches(name[:64], sorted(_fields), n=1)
        hints.append(echo(name) + (f" (did you mean {close[0]!r}?)" if close else ""))
    more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
    raise BodyError(
        f"{where}: RolloutState has no field {', '.join(hints)}{more}; put task-specific data in extra_fields"
    )


def judge_items_json(body: bytes, limits: BodyLimits) -> tuple[list[Any], bool] | None:
    """``/judge`` validated straight from the JSON bytes, when cheap byte counts prove the body
    within the key and string limits (at most as many keys as colons, no string longer than the
    body); None otherwise (the caller parses and walks it). Posted judger-written fields are
    checked on the validated fields. The items are not yet states (see
    :func:`judger.server.states.validate_json_items`): ``twin().adopt_all`` builds them."""
    if body.count(b":") > limits.max_keys_per_object or len(body) > limits.max_string_chars:
        return None
    many = body.lstrip()[:1] == b"["

    def posted(fields: dict[str, Any], i: int) -> None:
        # on the validated fields, before the state is built: a dict is cheaper to read than a model
        if fields.get("reward") is not None or fields.get("error_msg") is not None:
            name = "reward" if fields.get("reward") is not None else "error_msg"
            raise BodyError(f"{_at(i)}.{name}: written by the judger; post it as null or leave it out")
        status = fields.get("status", Status.INIT)
        if status is not Status.COMPLETED:
            if status is not Status.INIT:
                raise BodyError(
                    f"{_at(i)}.status: {echo(status.value)} cannot be judged; "
                    "post 'completed' or leave it out"
                )
            fields["status"] = Status.COMPLETED  # posted to be judged: a finished rollout
        extra = fields.get("extra_fields")
        if extra and "judge_failure" in extra:
            raise BodyError(f"{_at(i)}.extra_fields.judge_failure: written by the judger; leave it out")

    def _at(i: int) -> str:
        return f"[{i}]" if many else "body"

    try:
        items = validate_json_items(body, many, posted)
    except ValidationError as exc:
        if any(e.get("type") == "json_invalid" for e in exc.errors(include_input=False, include_url=False)):
            raise BodyError(f"body: invalid JSON ({validation_message(exc, 'body')})", status=400) from None
        raise BodyError(validation_message(exc, "" if many else "body", indexed=many)) from None
    return items, many


def judge_states(body: Any) -> tuple[list[RolloutState], bool]:
    """``/judge``: one RolloutState object or a list of them -> (states, whether a list was posted)."""
    global _states
    many = isinstance(body, list)
    items = (
        [_checked_state(item, f"[{i}]") for i, item in enumerate(body)]
        if many
        else [_checked_state(body, "body")]
    )
    if _states is None:
        _states = TypeAdapter(list[RolloutState])
    try:
        return _states.validate_python(items), many
    except ValidationError as exc:
        raise BodyError(validation_message(exc, "" if many else "body", indexed=many)) from None


PLAIN_READER = GetRewardReader()


def get_reward_states(body: Any, reader: GetRewardReader = PLAIN_READER) -> list[RolloutState]:
    """OpenRLHF's ``/get_reward``: ``{"query", "prompts", "labels", "data_sources"}`` -> states.

    The response is what follows the prompt in the query, read by ``reader``
    (:class:`~judger.server.openrlhf.GetRewardReader`: a query without its prompt is FAILED, and
    special-token text is stripped). OpenRLHF sends ``""`` for a sample
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
    return [
        reader.state(
            query,
            prompts[i] if prompts else None,
            labels[i] if labels is not None else None,
            _data_source(sources[i], f"data_sources[{i}]") if sources else None,
        )
        for i, query in enumerate(queries)
    ]


def validation_message(exc: ValidationError, where: str, *, indexed: bool = False) -> str:
    """pydantic's errors as ``field: message`` pairs, a bounded number, without the inputs."""
    parts = []
    for error in exc.errors(include_input=False, include_url=False)[:MAX_ERRORS]:
        loc = list(error.get("loc", ()))
        head = f"[{loc.pop(0)}]" if indexed and loc else where
        if not indexed and loc and loc[0] == 0:
            loc.pop(0)  # a single state was validated as a list of one
        field = ".".join(str(p) for p in loc)
        msg = str(error.get("msg", ""))
        if error.get("type") == "extra_forbidden" and len(loc) == 1:  # an unknown RolloutState field
            name = str(loc[0])
            parts.append(
                f"{head}: RolloutState has no field {echo(name)}{twin().hint(name)}; "
                "put task-specific data in extra_fields"
            )
            continue
        parts.append(f"{head}{'.' + field if field else ''}: {msg[:200]}")
    if exc.error_count() > MAX_ERRORS:
        parts.append(f"... and {exc.error_count() - MAX_ERRORS} more")
    return "; ".join(parts)
