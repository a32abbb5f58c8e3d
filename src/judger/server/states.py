"""RolloutStates from ``/judge`` bodies, validated once.

RolloutState's own validation runs a Python before-validator per state (its did-you-mean message for
unknown fields), which costs more than judging a cheap sample. The server already bounds and checks
what it accepts, so it validates posted states with a light twin of RolloutState: the same fields,
types and defaults, ``extra="forbid"``, no Python model validator, then hands the validated values
to :meth:`RolloutState.from_checked` (which validates again only a posted ``uid``/``rollout_id``,
the alias pair RolloutState's own validator keeps equal). The twin is used only while RolloutState has no
validator other than that one (checked when it is built); otherwise states are validated by
RolloutState itself, so no rule of the model is ever skipped.
"""

from __future__ import annotations

import difflib
import functools
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, create_model

from judger.core.rollout import RolloutState

# the model validators RolloutState is known to have, and which the server's own checks replace
_KNOWN_VALIDATORS = frozenset({"_reject_unknown_fields"})


class _Twin:
    def __init__(self) -> None:
        decorators = RolloutState.__pydantic_decorators__
        self.usable = (
            set(decorators.model_validators) <= _KNOWN_VALIDATORS
            and not decorators.field_validators
            and not decorators.validators
        )
        self.fields = sorted(RolloutState.model_fields)
        if self.usable:
            definitions: dict[str, Any] = {
                name: (field.annotation if not field.metadata else _annotated(field), field)
                for name, field in RolloutState.model_fields.items()
            }
            config = ConfigDict(**{**RolloutState.model_config, "extra": "forbid"})
            model: type[BaseModel] = create_model("RolloutStateIn", __config__=config, **definitions)
            self.one: TypeAdapter[Any] = TypeAdapter(model)
            self.many: TypeAdapter[Any] = TypeAdapter(list[model])
        else:
            self.one = TypeAdapter(RolloutState)
            self.many = TypeAdapter(list[RolloutState])

    def adopt(self, twin: Any) -> RolloutState:
        if not self.usable:
            return twin  # already a RolloutState
        # from_checked builds the state from the twin's checked values; a posted uid/rollout_id goes
        # through RolloutState's own validation there, which keeps XTuner's alias pair in step
        values = twin.__dict__
        return RolloutState.from_checked({name: values[name] for name in twin.__pydantic_fields_set__})

    def hint(self, name: str) -> str:
        close = difflib.get_close_matches(str(name)[:64], self.fields, n=1)
        return f" (did you mean {close[0]!r}?)" if close else ""


def _annotated(field: Any) -> Any:
    parts = (field.annotation, *field.metadata)
    return Annotated[parts]


@functools.cache
def twin() -> _Twin:
    """Built on first use (about 3 ms), not at import."""
    return _Twin()


def validate_json(body: bytes, many: bool) -> list[RolloutState]:
    """Validated RolloutStates from JSON bytes (one object, or a list when ``many``)."""
    t = twin()
    if many:
        return [t.adopt(item) for item in t.many.validate_json(body)]
    return [t.adopt(t.one.validate_json(body))]


__all__ = ["ValidationError", "twin", "validate_json"]
