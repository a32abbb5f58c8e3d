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


def opens_reasoning(text: str) -> bool:
    """Whether ``text`` opens with ``<think>`` (after any whitespace), as a reasoning model's
    response does when its chat template leaves the tag to it."""
    return text.startswith(OPEN) or (text[:1].isspace() and text.lstrip().startswith(OPEN))


def may_hold_reasoning(text: str, at: int) -> bool:
    """For a scorer that reads the answer found at ``at`` (near the end): whether
    :func:`committed_text` can change what it reads. A ``</think>`` after the answer puts it in the
    reasoning, and a response that opens with ``<think>`` may never have closed it; a ``</think>``
    before the answer leaves it where it was. Two looks instead of a scan of the whole text (a
    GSM8K response is scored in about the time a scan takes); what they miss is a ``<think>``
    reopened after a ``</think>`` and left open before the answer, where the cut could only take an
    answer away: a response gains nothing by it."""
    return opens_reasoning(text) or CLOSE in text[at:]


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
