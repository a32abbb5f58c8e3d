"""Whether a list answer is ordered: from the label's form, and from the prompt where it says so.

A tuple, an ordered pair or a bracketed list (``(3, -1, 2)``, ``[1, 2]``) is ordered: Math-Verify
compares it position by position. A set (``\\{1, 2\\}``) and a bare comma list (``1, 2``: MATH's
"enter all the solutions, separated by commas") are not, unless the prompt asks for an order
("in increasing order", "from least to greatest", "in order"): then a bare list is compared
position by position too.
"""

from __future__ import annotations

import re
from typing import Any

ORDER_REQUEST = re.compile(
    r"\b(?:in\s+(?:increasing|decreasing|ascending|descending|numerical|alphabetical)\s+order"
    r"|in\s+(?:that|this|the\s+same|the\s+given)\s+order|in\s+order"
    r"|from\s+(?:least|smallest|lowest)\s+to\s+(?:greatest|largest|highest)"
    r"|from\s+(?:greatest|largest|highest)\s+to\s+(?:least|smallest|lowest))\b",
    re.IGNORECASE,
)


_ENDS = ("greatest", "largest", "highest", "least", "smallest", "lowest")


def prompt_text(message: Any) -> str:
    """The text of the last user turn of a chat prompt (or the prompt itself when it is a string)."""
    if isinstance(message, str):
        return message
    if isinstance(message, list):
        for turn in reversed(message):
            if isinstance(turn, dict) and turn.get("role") == "user" and isinstance(turn.get("content"), str):
                return str(turn["content"])
    return ""


def asks_for_order(message: Any) -> bool:
    """True when the prompt asks for the answers in an order."""
    text = prompt_text(message).lower()
    # the regex only where one of its words occurs: most prompts have none, and this runs per sample
    if "order" not in text and not ("from" in text and any(w in text for w in _ENDS)):
        return False
    return ORDER_REQUEST.search(text) is not None
