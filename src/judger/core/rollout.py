"""The unit of work: one rollout, as the trainer hands it to a judger."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from enum import Enum
from numbers import Integral, Real
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, model_validator


class Status(str, Enum):
    """Lifecycle of a rollout. Values match XTuner's strings so states round-trip through JSON."""

    INIT = "init"
    COMPLETED = "completed"
    ABORTED = "aborted"
    EXPIRED = "expired"
    FAILED = "failed"
    FILTERED = "filtered"
    ARCHIVED = "archived"

    @classmethod
    def from_finish_reason(cls, finish_reason: str | None) -> Status:
        """Map an inference engine's finish reason to a status, as XTuner does."""
        if finish_reason in ("stop", "length", "tool_calls"):
            return cls.COMPLETED
        if finish_reason == "abort":
            return cls.ABORTED
        return cls.FAILED


def _sequence_of(kind: type, fast: type, name: str, schema: Any) -> PlainValidator:
    """A validator for token-length sequences that costs O(1), not O(tokens).

    Validating a 32k-token rollout's ids, logprobs and mask element by element would dominate
    building and judging it. Lists are kept as given (tuples and NumPy arrays become lists); only
    their first and last elements are type-checked, which catches the usual mix-ups (strings,
    nested lists, bools) without a pass over every token.
    """

    def valid(item: Any) -> bool:
        return type(item) is fast or (isinstance(item, kind) and not isinstance(item, bool))

    def check(value: Any) -> list[Any] | None:
        if type(value) is not list:
            if value is None:
                return None
            if isinstance(value, tuple):
                value = list(value)
            elif hasattr(value, "tolist") and getattr(value, "ndim", None) == 1:
                value = value.tolist()
            else:
                raise ValueError(f"must be a list of {name}, got {type(value).__name__}")
        if value:
            for item in (value[0], value[-1]):
                if not valid(item):
                    raise ValueError(f"must be a list of {name}, found {item!r} ({type(item).__name__})")
        return value

    return PlainValidator(check, json_schema_input_type=schema)


TokenIds = Annotated[list[int] | None, _sequence_of(Integral, int, "ints", list[int] | None)]
Floats = Annotated[list[float] | None, _sequence_of(Real, float, "numbers", list[float] | None)]


_FIELD_NAMES: dict[type, frozenset[str]] = {}
_DEFAULTS: list[tuple[dict[str, Any], list[tuple[str, Any]]]] = []


def _field_names(cls: type[BaseModel]) -> frozenset[str]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        # ``cls.model_fields`` costs microseconds per access (pydantic builds it on each
        # class-level lookup); a state is built in about 15: look it up once per class
        names = _FIELD_NAMES[cls] = frozenset(cls.model_fields)
    return names


def _defaults() -> tuple[dict[str, Any], list[tuple[str, Any]]]:
    """RolloutState's defaults in field order, and the fields whose default is made per state."""
    if not _DEFAULTS:
        fields = RolloutState.model_fields
        factories = [(n, f.default_factory) for n, f in fields.items() if f.default_factory is not None]
        defaults = {n: None if f.default_factory is not None else f.default for n, f in fields.items()}
        _DEFAULTS.append((defaults, factories))
    return _DEFAULTS[0]


class RolloutState(BaseModel):
    """One rollout: the prompt, what the model generated, and (after judging) its reward.

    A judger reads ``response`` and ``reward_model["ground_truth"]`` (and whatever a custom
    :class:`~judger.Judger` picks in ``preprocess``) and writes ``reward``, a dict holding a numeric
    ``score``. When judging fails, ``status`` becomes ``FAILED`` and ``error_msg`` says why.

    Per-sample data that has no field of its own belongs in ``extra_fields``; the verl row's
    ``extra_info`` lives at ``extra_fields["extra_info"]`` and is passed to reward handlers.

    XTuner's multimodal and MoE fields (``mm_info``, ``routed_experts``, ``position_ids``,
    ``response_model_steps``, ``proxy_attn_flops``) are accepted and carried as given (arrays and
    Ray ObjectRefs included); no judger reads them and they never enter a payload. ``uid`` is
    XTuner's deprecated alias of ``rollout_id``: whichever is set fills the other, as in XTuner.
    """

    # validate_assignment stays off: judgers write ``reward`` once per sample and re-validating the
    # whole model on every write would dominate the cost of judging trivial rewards. The schema is
    # built on first validation: a reader of verl rows never validates (20 ms of the start of
    # ``judger score``).
    model_config = ConfigDict(
        extra="forbid", arbitrary_types_allowed=True, use_enum_values=False, defer_build=True
    )

    message: list[dict[str, Any]] = Field(
        default_factory=list,
        description="the prompt as chat messages ({'role', 'content'} dicts)",
    )
    prompt_ids: TokenIds = Field(None, description="the prompt's token ids")
    num_tokens: int | None = Field(None, description="XTuner's token count of the sample; carried, not read")
    proxy_attn_flops: float | None = Field(
        None,
        description="XTuner's attention-cost estimate; carried, not read",
    )
    data_source: dict[str, Any] | str | None = Field(
        None,
        description=(
            "which dataset the sample comes from (verl's data_source): routes it in a "
            "ComposedJudgerConfig and verl's dispatch; a dict {branch: weight} selects several branches"
        ),
    )
    mm_info: dict[str, Any] | None = Field(
        None,
        description="XTuner's multimodal inputs; carried, never in a payload",
    )
    reward_model: dict[str, Any] | None = Field(
        None,
        description=(
            "the label: ground_truth holds what the judger compares with (verl's reward_model column)"
        ),
    )
    group_id: int | str | None = Field(
        None,
        description="the group (one prompt's samples) the sample belongs to",
    )
    session_id: int | str | None = Field(None, description="the agent session, for multi-turn rollouts")
    rollout_id: int | str | None = Field(
        None,
        description="the sample's id (XTuner's uid is kept equal to it)",
    )
    task_name: str | None = Field(
        None,
        description="the task the sample was drawn for (TaskSpecConfig.task_name)",
    )
    tokens: TokenIds = Field(
        None,
        description="prompt and response token ids together, where the engine gives them so",
    )
    tools: list[Any] | None = Field(None, description="tool schemas offered to the model")
    tool_choice: str | dict[str, Any] | None = Field(
        None,
        description="the tool-choice setting of the request",
    )
    sample_params: Any = Field(
        None,
        description=(
            "the sampling parameters the sample was generated with (a SampleParams, a dict, or XTuner's "
            "object)"
        ),
    )
    response: str | None = Field(None, description="the model's text: what a judger judges")
    tool_calls: list[Any] | None = Field(None, description="tool calls the model made")
    response_ids: TokenIds = Field(
        None,
        description="the response's token ids (DAPO's overlong penalty counts them)",
    )
    logprobs: Floats = Field(None, description="the log-probability of each response token")
    routed_experts: Any = Field(  # XTuner: np.ndarray | ObjectRef | list[ObjectRef]
        None,
        description="XTuner's MoE routing record (an array or Ray ObjectRefs); carried, never in a payload",
    )
    finish_reason: str | None = Field(
        None,
        description="the engine's finish reason ('stop', 'length', 'abort', ...)",
    )
    response_mask: TokenIds = Field(
        None,
        description="1 for each response token that is trained on, 0 for the others",
    )
    response_model_steps: TokenIds = Field(
        None,
        description="XTuner's per-token model step; carried, not read",
    )
    seq_staleness: int = Field(
        0,
        description="how many policy updates older than the current one the sample's policy is",
    )
    input_ids: TokenIds = Field(None, description="the training sequence's token ids (prepare_train_data)")
    labels: TokenIds = Field(None, description="the training sequence's labels (prepare_train_data)")
    reward: dict[str, Any] | None = Field(
        None,
        description=(
            "written by the judger: a dict holding a finite numeric score (and whatever else the judger "
            "returns); None until judged, and for a FAILED sample"
        ),
    )
    uid: int | str | None = Field(
        None,
        description="XTuner's deprecated alias of rollout_id: whichever is set fills the other",
    )
    status: Status = Field(
        Status.INIT,
        description="the sample's lifecycle; FAILED when judging failed (error_msg says why)",
    )
    error_msg: str | None = Field(None, description="why the sample FAILED: '<ExceptionType>: <reason>'")
    position_ids: Any = Field(  # XTuner: np.ndarray
        None,
        description="XTuner's position ids (an array); carried, never in a payload",
    )
    extra_fields: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "per-sample data without a field of its own: a verl row's extra_info lives at "
            "extra_fields['extra_info']; judge_failure records a failure's judger and kind"
        ),
    )

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_fields(cls, data: Any) -> Any:
        # pydantic's own message only says "Extra inputs are not permitted"; say what to do instead.
        if isinstance(data, dict):
            names = _field_names(cls)
            if not names.issuperset(data):
                hints = []
                for name in sorted(data.keys() - names, key=str):
                    close = difflib.get_close_matches(str(name), list(cls.model_fields), n=1)
                    hint = f" (did you mean {close[0]!r}?)" if close else ""
                    hints.append(f"{name!r}{hint}")
                raise ValueError(
                    f"RolloutState has no field {', '.join(hints)}; put task-specific data in "
                    "extra_fields={...} instead"
                )
            # XTuner keeps its deprecated ``uid`` equal to ``rollout_id``; done here, not in a
            # post-init hook, so that states without either cost nothing more to build
            if "uid" in data or "rollout_id" in data:
                rollout_id, uid = data.get("rollout_id"), data.get("uid")
                if rollout_id is not None and uid != rollout_id:
                    data = {**data, "uid": rollout_id}
                elif rollout_id is None and uid is not None:
                    data = {**data, "rollout_id": uid}
        return data

    @classmethod
    def from_checked(cls, values: dict[str, Any]) -> RolloutState:
        """A state from field values the caller has already checked, without validating them again.

        For internal readers that build many states from values they check themselves
        (``judger.trainer.io``): validation would repeat those checks at about 10 us a state, more
        than judging a cheap sample. ``values`` must hold only field names, each value of its
        field's type (token sequences as lists); the caller keeps no other reference to the
        containers it passes. Fields not given take their defaults (fresh lists and dicts).
        ``uid``/``rollout_id``, a name that is not a field, or a subclass (which may add validators)
        go through ordinary validation, so no rule of the model is skipped for them.
        """
        if cls is not RolloutState:
            return cls.model_validate(values)
        defaults, factories = _defaults()
        return _build_checked(values, _field_names(cls), defaults, factories)

    @classmethod
    def from_checked_many(cls, many: Iterable[dict[str, Any]]) -> list[RolloutState]:
        """:meth:`from_checked` of each dict, with the per-class lookups done once for them all."""
        if cls is not RolloutState:
            return [cls.model_validate(values) for values in many]
        names = _field_names(cls)
        defaults, factories = _defaults()
        return [_build_checked(values, names, defaults, factories) for values in many]

    @property
    def ground_truth(self) -> Any:
        """``reward_model["ground_truth"]``, or None when there is no reward model."""
        return self.reward_model.get("ground_truth") if self.reward_model else None


def fields_builder(keys: Iterable[str]) -> Callable[[dict[str, Any]], RolloutState]:
    """:meth:`RolloutState.from_checked` for a reader whose every ``values`` holds exactly ``keys``:
    what ``from_checked`` asks of each call (field names only, no ``uid``/``rollout_id``, every field
    made per state given) is asked of ``keys`` here, once. ValueError if ``keys`` do not pass."""
    keyset = frozenset(keys)
    defaults, factories = _defaults()
    made = {name for name, _ in factories}
    fields_only = _field_names(RolloutState).issuperset(keyset) and not {"uid", "rollout_id"} & keyset
    if not fields_only or not made <= keyset:
        raise ValueError(
            f"fields_builder needs RolloutState field names other than uid and rollout_id, with "
            f"{sorted(made)} among them; got {sorted(keyset)}"
        )
    copy = defaults.copy

    def build(values: dict[str, Any]) -> RolloutState:
        data = copy()
        data.update(values)
        return _state_of(data, set(keyset))

    return build


def _build_checked(
    values: dict[str, Any],
    names: frozenset[str],
    defaults: dict[str, Any],
    factories: list[tuple[str, Any]],
) -> RolloutState:
    if not names.issuperset(values) or "uid" in values or "rollout_id" in values:
        return RolloutState.model_validate(values)
    data = defaults.copy()
    for name, factory in factories:
        if name not in values:
            data[name] = factory()
    data.update(values)
    # set(dict) sizes the table for the keys at once: a set grown one key at a time would be half
    # as large again, for every state held
    return _state_of(data, set(values))


def _state_of(data: dict[str, Any], fields_set: set[str]) -> RolloutState:
    """A RolloutState of ``data`` (every field, in field order, as validation lays the dict out)."""
    state = _new(RolloutState)
    _put(state, "__dict__", data)
    _put(state, "__pydantic_fields_set__", fields_set)
    _put(state, "__pydantic_extra__", None)
    _put(state, "__pydantic_private__", None)
    return state


_new, _put = object.__new__, object.__setattr__


# RolloutState leaves validate_assignment off (see its model_config); if that changes, writes go
# through pydantic again
_DIRECT_WRITE = not RolloutState.model_config.get("validate_assignment")


def direct_writes() -> bool:
    """Whether :func:`write_reward` writes a plain ``RolloutState``'s instance dict directly."""
    return _DIRECT_WRITE


def write_reward(state: RolloutState, reward: dict[str, Any] | None) -> None:
    """``state.reward = reward``, written the way pydantic's ``__setattr__`` writes a plain field
    (instance dict and fields-set) without its Python-level dispatch, which costs more than judging
    a trivial sample. Subclasses, which may validate assignments, go through pydantic."""
    if _DIRECT_WRITE and type(state) is RolloutState:
        state.__dict__["reward"] = reward
        state.__pydantic_fields_set__.add("reward")
    else:
        state.reward = reward
