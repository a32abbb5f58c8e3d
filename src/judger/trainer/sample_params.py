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
    temperature: float | None = Field(None, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = None
    min_p: float | None = Field(None, ge=0, le=1)
    max_tokens: int | None = Field(None, ge=1)
    min_tokens: int | None = Field(None, ge=0)
    stop: list[str] | None = Field(None, alias="stops")
    stop_token_ids: list[int] | None = None
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = Field(None, gt=0)
    skip_special_tokens: bool | None = None
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
