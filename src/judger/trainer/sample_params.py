"""SampleParams: the sampling parameters a rollout request carries to an OpenAI-compatible server.

Only the fields that are set are sent, so the server's own defaults apply to the rest. A field the
class does not know is refused by name (a typo such as ``temprature`` would otherwise be ignored by
the server and sample at the default temperature); parameters of one engine go in ``extra_body``,
sent as given. XTuner's names are accepted too: ``stops`` for ``stop``, ``do_sample=False`` for
greedy (``temperature=0``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class SampleParams(BaseModel):
    """Sampling parameters; ``n`` is the number of samples per request (see the agent loop)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    n: int | None = Field(None, ge=1, description="samples per request; None: the whole group in one")
    temperature: float | None = Field(None, ge=0, description="sampling temperature; 0 is greedy")
    top_p: float | None = Field(
        None,
        gt=0,
        le=1,
        description="nucleus sampling: the smallest set of tokens whose probabilities reach top_p",
    )
    top_k: int | None = Field(None, description="sample among the k most likely tokens (-1 or None: all)")
    min_p: float | None = Field(
        None,
        ge=0,
        le=1,
        description="leave out tokens less likely than min_p times the most likely one",
    )
    max_tokens: int | None = Field(None, ge=1, description="the most tokens a sample may generate")
    min_tokens: int | None = Field(
        None,
        ge=0,
        description="the fewest tokens a sample generates before it may stop",
    )
    stop: list[str] | None = Field(
        None,
        alias="stops",
        description="strings that end generation (XTuner's stops is accepted too)",
    )
    stop_token_ids: list[int] | None = Field(None, description="token ids that end generation")
    seed: int | None = Field(
        None,
        description=(
            "the sampling seed (a group sent as several requests gives each request seed + its first "
            "sample's index)"
        ),
    )
    presence_penalty: float | None = Field(None, description="OpenAI's presence penalty")
    frequency_penalty: float | None = Field(None, description="OpenAI's frequency penalty")
    repetition_penalty: float | None = Field(None, gt=0, description="vLLM's repetition penalty (1: none)")
    skip_special_tokens: bool | None = Field(None, description="drop special tokens from the returned text")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="engine-specific fields, sent as is")

    @model_validator(mode="before")
    @classmethod
    def _xtuner_names(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            if isinstance(data.get("stop"), str):
                data["stop"] = [data["stop"]]
            if data.pop("do_sample", True) is False:
                if data.get("temperature") not in (None, 0, 0.0):
                    raise ValueError("do_sample=False contradicts temperature > 0; give one of them")
                data["temperature"] = 0.0
        return data

    def to_body(self) -> dict[str, Any]:
        """The request fields: those set (``n`` excluded: the controller sets it per request)."""
        body = self.model_dump(exclude_none=True, exclude={"n", "extra_body"})
        body.update(self.extra_body)
        return body


def as_sample_params(value: Any) -> SampleParams:
    """A SampleParams from a SampleParams, a dict, or any pydantic model / object with the same fields."""
    if value is None:
        return SampleParams()
    if isinstance(value, SampleParams):
        return value
    if isinstance(value, dict):
        return SampleParams.model_validate(value)
    if isinstance(value, BaseModel):
        return SampleParams.model_validate(value.model_dump(exclude_none=True))
    raise TypeError(f"sample_params must be a dict or SampleParams, got {type(value).__name__}")
