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
    digits, say) makes it raise OverflowError. Reports count such a value as missing, as they count
    NaN: one sample's value must not take the variable's figures from every other sample."""
    return -_FLOAT_MAX <= value <= _FLOAT_MAX


def finite_number(value: Any) -> float | None:
    """``value`` as a finite float (a bool as 0/1), or None when it is none: NaN, an infinity, an int
    past float's range, text, None. For reports and protocols that average or carry numbers."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int):
        return float(value) if fits_float(value) else None
    if isinstance(value, float) and math.isfinite(value):
        return float(value)
    return None


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
        value = float(score)
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
