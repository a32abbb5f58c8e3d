"""Reading a server's reply to one generation request: its choices in order, and its usage counts.

Servers differ in what they honour. vLLM and SGLang answer ``n`` choices for ``n``; llama.cpp's
server (and others) ignore ``n`` and answer one. A reply with fewer choices than asked, numbered
0..k-1, is such a server: its choices are real samples, and the rest of the group must be asked for
again (the controller then sends requests of one). More choices than asked, or indexes that are
not 0..k-1 once each, is a broken reply.
"""

from __future__ import annotations

from typing import Any

from judger.core.errors import GenerationError


def ordered_choices(reply: Any, n: int) -> list[Any]:
    """The choices of ``reply`` by index: ``n`` of them, or the first ``k < n`` when the server
    answered fewer (indexes 0..k-1 once each in both cases); GenerationError otherwise."""
    choices = reply["choices"]
    if not isinstance(choices, list):
        raise GenerationError(f"choices is a {type(choices).__name__}, not a list")
    if not choices or len(choices) > n:
        raise GenerationError(f"asked for {n} choices, the server sent {len(choices)}")
    k = len(choices)
    indexes = [c.get("index", i) if isinstance(c, dict) else i for i, c in enumerate(choices)]
    if any(type(i) is not int for i in indexes) or sorted(indexes) != list(range(k)):
        raise GenerationError(f"choice indexes {indexes[:16]!r:.200} are not 0..{k - 1} once each")
    return [c for _, c in sorted(zip(indexes, choices), key=lambda pair: pair[0])]


def _count(usage: dict[str, Any], key: str) -> int | None:
    value = usage.get(key)
    return value if type(value) is int and value >= 0 else None


def usage_counts(reply: dict[str, Any]) -> dict[str, int]:
    """``prompt_tokens`` and ``completion_tokens`` of the reply's ``usage``, those that are
    counts (a missing, negative or non-integer one is left out)."""
    usage = reply.get("usage")
    if not isinstance(usage, dict):
        return {}
    counts = {key: _count(usage, key) for key in ("prompt_tokens", "completion_tokens")}
    return {key: value for key, value in counts.items() if value is not None}
