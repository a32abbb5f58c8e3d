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


OPENING = 64
"""How far into a response a reasoning model's opening ``<think>`` is looked for by :func:`may_reason`."""


def may_reason(text: str) -> bool:
    """Whether :func:`committed_text` can differ from ``text`` where it matters: a ``</think>``
    anywhere, or a ``<think>`` opening the response (within :data:`OPENING` characters).

    One scan of the text for the longer tag instead of two: a GSM8K response is scored in about the
    time a scan takes. What it misses is a ``<think>`` opened further in and never closed; cutting
    there could only take an answer away, so a response gains nothing by it.
    """
    return CLOSE in text or OPEN in text[:OPENING]


def committed_text(text: str) -> str:
    """``text`` after its last ``</think>``, and before a ``<think>`` left open after that."""
    close = text.rfind(CLOSE)
    if close >= 0:
        text = text[close + len(CLOSE) :]
    start = text.find(OPEN)
    return text if start < 0 else text[:start]
