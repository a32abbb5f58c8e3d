"""The part of a response the model committed to: its text outside ``<think>`` reasoning.

A reasoning model writes drafts, guesses and checks inside ``<think>...</think>``; what it answers
follows the last ``</think>``. A box or a ``####`` line inside the reasoning is never the answer:
otherwise a policy could try one answer there and another after it, and be paid for either. A
``</think>`` with no opening tag closes reasoning that the chat template opened in the prompt
(Qwen3, DeepSeek-R1); a ``<think>`` that never closes is reasoning that never ended (a truncated
response): nothing after it is committed. A response without the tags is committed whole.
"""

from __future__ import annotations

OPEN = "<think>"
CLOSE = "</think>"


def committed_text(text: str) -> str:
    """``text`` after its last ``</think>``, and before a ``<think>`` left open after that.

    A caller on a hot path tests ``"think>" in text`` first: one scan finds either tag (about 900
    instructions on a 400-character response, the cheapest needle measured), and most responses
    hold neither."""
    close = text.rfind(CLOSE)
    if close >= 0:
        text = text[close + len(CLOSE) :]
    start = text.find(OPEN)
    return text if start < 0 else text[:start]
