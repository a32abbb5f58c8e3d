"""Validation of what a judger returns: a dict whose ``score``, if present, is a finite number."""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from numbers import Real
from typing import Any

from judger.core.errors import JudgerOutputError

_FLOAT_MAX = sys.float_info.max


def fits_float(value: int) -> bool:
    """Whether ``float(value)`` is defined: an int past float's range (a reward variable counting
    digits, say) makes it raise OverflowError (see :func:`float_or_nan`)."""
    return -_FLOAT_MAX <= value <= _FLOAT_MAX


def float_or_nan(value: Any) -> float:
    """``float(value)`` of a number, NaN when no float holds it (an int or a Fraction past float's
    range raises OverflowError). Reports count NaN as missing: one sample's value must not stop, nor
    take the figures of, every other."""
    try:
        return float(value)
    except OverflowError:
        return math.nan


def finite_number(value: Any) -> float | None:
    """``value`` as a finite float (a bool as 0/1), or None when it is none: NaN, an infinity, a
    number no float holds, text, None. NumPy's scalars count as the numbers they hold. For reports
    and protocols that average or carry numbers."""
    if type(value) is float:
        return value if math.isfinite(value) else None
    if not isinstance(value, Real):
        item = getattr(value, "item", None)  # NumPy's bool_ and 0-d arrays are not Real
        try:
            value = item() if callable(item) else None
        except (TypeError, ValueError):
            return None
        if not isinstance(value, Real):
            return None
    number = float_or_nan(value)
    return number if math.isfinite(number) else None


def _where(judger_name: str, index: int | None) -> str:
    return f"judger {judger_name!r}" + (f" (batch index {index})" if index is not None else "")


def coerce_score(score: Any, judger_name: str, index: int | None = None) -> float:
    """A score as float. bool counts as 0/1; NaN, inf, strings, None and the like are rejected."""
    # numpy scalars are not ``Real`` for np.bool_, and 0-d arrays are not Real at all
    if hasattr(score, "item") and not isinstance(score, (list, tuple, dict)):
        try:
            score = score.item()
        except (TypeError, ValueError):
            pass
    if isinstance(score, bool):
        return float(score)
    if isinstance(score, Real):
        value = float_or_nan(score)  # one past float's range is refused below, by name
        if math.isfinite(value):
            return value
    raise JudgerOutputError(
        f"{_where(judger_name, index)} returned score={score!r} ({type(score).__name__}); "
        "'score' must be a finite real number (bool counts as 0/1)"
    )


def check_output(output: Any, judger_name: str, index: int | None = None) -> dict[str, Any]:
    """Return ``output`` as a dict with a float ``score``, or raise naming the judger and value."""
    if not isinstance(output, dict):
        if isinstance(output, Mapping):
            output = dict(output)
        else:
            raise JudgerOutputError(
                f"{_where(judger_name, index)} returned {type(output).__name__} {output!r:.200}; "
                "a judger must return a dict such as {'score': 1.0}"
            )
    if "score" in output:
        score = output["score"]
        if type(score) is not float or not math.isfinite(score):
            output["score"] = coerce_score(score, judger_name, index)
    return output
