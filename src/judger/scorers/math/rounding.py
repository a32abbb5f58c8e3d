"""Whether the prompt asks for a decimal or a rounding, and to how many places.

This is the evidence the decimal policy (:mod:`judger.scorers.math.approx`) needs before it pays a
decimal for an exact label: without it, ``3.1`` for ``\\pi`` is an estimate, not the answer. The
prompt is the dataset's text, never the policy's, so reading it cannot be farmed.

- ``"to the nearest tenth"`` / ``hundredth`` / ``thousandth`` / ``ten-thousandth``: 1-4 places;
  ``"nearest cent"``: 2; ``"nearest whole number"`` / ``integer`` / ``percent`` / ``degree``: 0;
- ``"to 3 decimal places"`` (a digit or a number word): that many;
- ``"as a decimal"``, ``"significant figures"``, ``"round"``, ``"approximate"``,
  ``"estimate"``: a decimal at a precision the answer states (``"decimal"``).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal

from judger.scorers.math.order import prompt_text

Rounding = int | Literal["decimal"] | None
"""Places the prompt asks for; ``"decimal"``: a decimal, places unsaid; None: no request."""

_PLACE_WORDS = {
    "ten-thousandth": 4, "ten thousandth": 4, "thousandth": 3, "hundredth": 2, "tenth": 1,
    "cent": 2, "whole number": 0, "integer": 0, "whole percent": 0, "percent": 0, "degree": 0,
}  # fmt: skip
_CUES = ("decimal", "nearest", "round", "approx", "significant", "estimat")
_NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_NEAREST = re.compile(r"\bnearest\s+(" + "|".join(sorted(_PLACE_WORDS, key=len, reverse=True)) + r")\b")
_PLACES = re.compile(r"\b(\d|one|two|three|four|five|six)\s+decimal\s+places?\b")
_DECIMAL = re.compile(
    r"\bas\s+a\s+decimal\b|\bin\s+decimal\s+form\b|\bdecimal\s+(?:approximation|places?)\b"
    r"|\bsignificant\s+(?:figures?|digits?)\b|\bround(?:ed|ing)?\b|\bapproximat\w*|\bestimat\w*"
)


def requested_rounding(message: object) -> Rounding:
    """The rounding the prompt (a string or a chat's last user turn) asks for (see the module)."""
    return _rounding(prompt_text(message))


@lru_cache(maxsize=1024)
def _rounding(text: str) -> Rounding:
    # a GRPO group repeats its prompt: each distinct text is read once
    text = text.lower()
    if not any(word in text for word in _CUES):
        return None  # most prompts: no regex at all
    found = _NEAREST.search(text)
    if found is not None:
        return _PLACE_WORDS[found[1]]
    found = _PLACES.search(text)
    if found is not None:
        word = found[1]
        return int(word) if word.isdigit() else _NUMBER_WORDS[word]
    return "decimal" if _DECIMAL.search(text) else None
