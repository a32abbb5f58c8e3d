"""A completion longer than ``judger eval`` asked for is a broken reply, not an answer to judge.

A server that honours ``max_tokens`` sends at most that many tokens, and a token's text is short
(the longest in common vocabularies are runs of spaces or punctuation): :data:`MAX_BYTES_PER_TOKEN`
leaves a wide margin. A reply past either bound (64 MiB of text for
``--max-tokens 16`` was judged, scored 1.0 and written) fails its sample as a generation failure,
with the reason, before anything judges it; its row keeps only the text a reply could have held.
"""

from __future__ import annotations

from collections.abc import Iterable

from judger.core.rollout import RolloutState, Status

MAX_BYTES_PER_TOKEN = 256


def overlong(state: RolloutState, max_tokens: int | None) -> str | None:
    """Why ``state``'s completion is longer than a reply to ``max_tokens`` can be; None if it is not."""
    if state.status != Status.COMPLETED:
        return None
    ids = state.response_ids
    if max_tokens is not None and ids is not None and len(ids) > max_tokens:
        return f"the server sent {len(ids)} completion tokens for max_tokens={max_tokens}"
    tokens = max_tokens if max_tokens is not None else (len(ids) if ids is not None else None)
    if tokens is None:
        return None
    size = len((state.response or "").encode("utf-8", "surrogatepass"))
    limit = max(1, tokens) * MAX_BYTES_PER_TOKEN
    if size <= limit:
        return None
    asked = f"max_tokens={max_tokens}" if max_tokens is not None else f"the {tokens} token ids it sent"
    return (
        f"the server sent {size:,} bytes of completion for {asked}: more than {limit:,} "
        f"({MAX_BYTES_PER_TOKEN} bytes a token)"
    )


def fail_overlong(states: Iterable[RolloutState], max_tokens: int | None) -> None:
    """Fail each completion :func:`overlong` finds, as a generation failure (not judged, counted in
    the exit code), its text cut to what a reply could have held."""
    for state in states:
        reason = overlong(state, max_tokens)
        if reason is None:
            continue
        message = f"broken reply: {reason}; not judged"
        state.status = Status.FAILED
        state.error_msg = message
        state.extra_fields["generation_failure"] = message
        tokens = max_tokens if max_tokens is not None else len(state.response_ids or ())
        keep = max(1, tokens) * MAX_BYTES_PER_TOKEN
        text = state.response or ""
        if len(text) > keep:
            state.response = text[:keep]
