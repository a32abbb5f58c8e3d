"""RolloutStates from ``/judge`` bodies, validated once.

RolloutState's own validation runs a Python before-validator per state (its did-you-mean message for
unknown fields), which costs more than judging a cheap sample. The server already bounds and checks
what it accepts, so it validates posted states with a light twin of RolloutState: a TypedDict of
the same fields and types, ``extra="forbid"``, no Python model validator, then hands the validated
values to :meth:`RolloutState.from_checked`, which fills the defaults and validates again only a
posted ``uid``/``rollout_id`` (the alias pair RolloutState's own validator keeps equal). The twin
is used only while RolloutState has no validator other than that one (checked when it is built);
otherwise states are validated by RolloutState itself, so no rule of the model is ever skipped.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import ConfigDict, TypeAdapter, ValidationError
from typing_extensions import TypedDict

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
            fields = {
                name: field.annotation if not field.metadata else _annotated(field)
                for name, field in RolloutState.model_fields.items()
            }
            # a TypedDict, not a model: validation yields plain dicts of just the posted fields,
            # which from_checked takes as they are (no model instance built and read back)
            make: Any = TypedDict  # built at run time from RolloutState's fields; mypy cannot see them
            twin = make("RolloutStateIn", fields, total=False)
            twin.__pydantic_config__ = ConfigDict(**{**RolloutState.model_config, "extra": "forbid"})
            self.one: TypeAdapter[Any] = TypeAdapter(twin)
            self.many: TypeAdapter[Any] = TypeAdapter(list[twin])  # type: ignore[valid-type]
        else:
            self.one = TypeAdapter(RolloutState)
            self.many = TypeAdapter(list[RolloutState])

    def adopt_all(self, items: list[Any]) -> list[RolloutState]:
        if not self.usable:
            return items  # already RolloutStates
        # from_checked builds the states from the twin's checked values; a posted uid/rollout_id
        # goes through RolloutState's own validation there, which keeps XTuner's alias pair in step
        return RolloutState.from_checked_many(items)

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


def validate_json_items(
    body: bytes, many: bool, check: Callable[[dict[str, Any], int], None] | None = None
) -> list[Any]:
    """Validated posted states from JSON bytes (one object, or a list when ``many``), before any
    RolloutState is built: on the twin's path (``twin().usable``) each item is the dict of its
    posted fields, which ``twin().adopt_all`` turns into states; otherwise it is the RolloutState.

    ``check(fields, i)`` sees each item's validated fields as a dict (only the posted fields on the
    twin's path, every field otherwise) and may raise or set a field.
    """
    t = twin()
    items = t.many.validate_json(body) if many else [t.one.validate_json(body)]
    if check is not None:
        for i, item in enumerate(items):
            check(item if t.usable else item.__dict__, i)
    return items


__all__ = ["ValidationError", "twin", "validate_json_items"]
