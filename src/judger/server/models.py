"""Request and response bodies of ``judger serve`` (they make the OpenAPI docs at /docs).

:class:`RewardRequest` is also ``/reward``'s parser: its fields are the protocol, documented and
checked from the one declaration. The other bodies are checked by :mod:`judger.server.requests`
(cheaper and bounded); their models here describe the same protocol for clients and the docs.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from judger.core.rollout import RolloutState, Status
from judger.server.body import BodyError, echo


def is_data_source(value: Any) -> bool:
    """A data_source a client may post: a string, an object of numeric weights, or null."""
    if value is None or isinstance(value, str):
        return True
    return isinstance(value, dict) and all(isinstance(v, (int, float)) for v in value.values())


def _refused(message: str) -> PydanticCustomError:
    return PydanticCustomError("reward_body", message)


def _text_or_null(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise _refused(f"expected a string or null, got {type(value).__name__}")
    return value


def _object_or_empty(value: Any) -> dict[str, Any]:
    value = value or {}  # a falsy extra_info (null, "", 0, []) is none
    if not isinstance(value, dict):
        raise _refused(f"expected a JSON object, got {type(value).__name__}")
    return value


def _data_source(value: Any) -> Any:
    if not is_data_source(value):
        raise _refused("expected a string, an object of weights, or null")
    return value


# ``/reward`` parses its body with RewardRequest.parse: a field is declared here once (its type, its
# check, its description in the docs) and put into the sample by state(). The checks keep the values
# as posted (no coercion) and name the field; the first failing one is the answer.
class RewardRequest(BaseModel):
    """The seeds' URL-handler protocol: one sample."""

    model_config = ConfigDict(extra="forbid")

    response: Annotated[str | None, PlainValidator(_text_or_null, json_schema_input_type=str | None)] = Field(
        ..., description="the model's response text, or null"
    )
    label: Any = Field(None, description="the ground truth (reward_model['ground_truth'])")
    extra_info: Annotated[
        dict[str, Any], PlainValidator(_object_or_empty, json_schema_input_type=dict[str, Any])
    ] = Field(default_factory=dict, description="per-sample extra information")
    data_source: Annotated[
        str | dict[str, float] | None,
        PlainValidator(_data_source, json_schema_input_type=str | dict[str, float] | None),
    ] = Field(None, description="optional: routes the sample in a composed judger")

    @classmethod
    def parse(cls, body: Any) -> RolloutState:
        """``/reward``'s body -> one state, or :class:`BodyError` naming the field and the fix."""
        if not isinstance(body, dict):
            raise BodyError(f"body: expected a JSON object, got {type(body).__name__}")
        declared = _declared.get(cls)
        if declared is None:  # looked up once: model_fields costs microseconds per access
            declared = _declared[cls] = (tuple(cls.model_fields), frozenset(cls.model_fields))
        unknown = body.keys() - declared[1]
        if unknown:
            names = ", ".join(echo(k) for k in sorted(unknown)[:5])
            raise BodyError(f"body: unknown field(s) {names}; allowed: {', '.join(declared[0])}")
        try:
            request = cls.model_validate(body)
        except ValidationError as exc:
            raise BodyError(_first_refusal(cls, exc)) from None
        return request.state()

    def state(self) -> RolloutState:
        """The sample to judge: ``extra_info``'s ``question`` (or ``prompt``) as the user message."""
        extra_info = self.extra_info
        question = extra_info.get("question", extra_info.get("prompt"))
        return RolloutState(
            message=[{"role": "user", "content": question}] if isinstance(question, str) else [],
            response=self.response,
            reward_model={"ground_truth": self.label},
            data_source=self.data_source,
            status=Status.COMPLETED,
            extra_fields={"extra_info": extra_info} if extra_info else {},
        )


# a request model's declared field names, in order and as a set
_declared: dict[type[BaseModel], tuple[tuple[str, ...], frozenset[str]]] = {}


def _first_refusal(model: type[BaseModel], exc: ValidationError) -> str:
    """The first error, as ``field: why`` (a missing field: its description says what it takes)."""
    error = exc.errors(include_url=False, include_input=False)[0]
    field = ".".join(str(p) for p in error["loc"]) or "body"
    if error["type"] == "missing":
        return f"{field}: Field required ({model.model_fields[field].description})"
    return f"{field}: {error['msg']}"


class RewardResponse(BaseModel):
    """The reward dict the judger produced: a numeric ``score`` plus whatever else it reports."""

    model_config = ConfigDict(extra="allow")

    score: float


class JudgeFailureBody(BaseModel):
    """Which judger failed on the sample, how, and its message."""

    judger: str
    kind: str = Field(..., description="'error' or 'timeout'")
    message: str


class ErrorBody(BaseModel):
    """Why a request was not answered with a reward."""

    detail: Any
    judge_failure: JudgeFailureBody | None = None


class JudgedState(BaseModel):
    """What ``/judge`` answers per state (``?full=true``: the whole judged RolloutState)."""

    reward: dict[str, Any] | None = Field(..., description="the reward dict; null when judging failed")
    status: str = Field(..., description="'completed', or 'failed' with error_msg")
    error_msg: str | None = None


class GetRewardRequest(BaseModel):
    """OpenRLHF's remote reward protocol. ``query`` is prompt + response; the response is what
    follows the prompt when the query starts with it. A label ``""`` (OpenRLHF's value for a sample
    without one) counts as no label."""

    model_config = ConfigDict(extra="ignore")

    query: list[str] = Field(..., description="full texts: prompt followed by response")
    prompts: list[str] | None = Field(None, description="the prompt of each query")
    labels: list[Any] | None = Field(None, description="the ground truth of each query")
    data_sources: list[str | dict[str, float] | None] | None = Field(
        None, description="the data source of each query (routes it in a composed judger)"
    )

    @model_validator(mode="after")
    def _same_lengths(self) -> GetRewardRequest:
        n = len(self.query)
        for name in ("prompts", "labels", "data_sources"):
            value = getattr(self, name)
            if value is not None and len(value) != n:
                raise ValueError(f"{name} has {len(value)} items but query has {n}; they must match")
        return self


class GetRewardResponse(BaseModel):
    """OpenRLHF's reply: one numeric reward per query, plus per-key numeric lists for logging."""

    rewards: list[float] = Field(
        ...,
        description="the score of each query; the server's failure_reward (default: the judger's "
        "lowest score) where judging failed",
    )
    scores: list[float] = Field(..., description="same as rewards (OpenRLHF uses it for filtering)")
    extra_logs: dict[str, list[float]] = Field(
        default_factory=dict,
        description="the server's log keys (default: acc), one number per query, 0.0 where missing or "
        "where judging failed; judge_failed: 1.0 where it failed. The same keys in every reply",
    )
    failures: list[JudgeFailureBody | None] = Field(
        default_factory=list, description="per query: null, or which judger failed, how and why"
    )


class HealthResponse(BaseModel):
    """Liveness, the judger served, and how busy the server is."""

    status: str
    judger: str
    in_flight: int
    max_concurrency: int
    uptime_s: float
