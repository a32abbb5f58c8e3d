"""What generation did in `judger eval`: finish reasons, token counts and failure reasons.

A row scored 0 because the model hit ``max_tokens`` is not a wrong answer the way a finished one
is: the report counts, per data_source, the ``stop`` and ``length`` finishes (and any other), the
samples whose generation failed, the mean response length in tokens and the most frequent failure
reasons; every output row carries its ``finish_reason``, ``truncated`` flag and token counts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from judger.cli.report import data_source_name
from judger.core.rollout import RolloutState

TOP_REASONS = 3
_REASON_CHARS = 160

# the columns every row of `judger eval`'s output gains
FINISH = "finish_reason"
TRUNCATED = "truncated"
PROMPT_TOKENS = "prompt_tokens"
RESPONSE_TOKENS = "response_tokens"


def record_generation(state: RolloutState) -> None:
    """Put what generation did on the row's own columns, so that the output file carries it (and a
    resumed run reads it back). A sample whose request failed has ``finish_reason="failed"``."""
    columns = dict(state.extra_fields.get("columns") or {})
    failed = "generation_failure" in state.extra_fields
    columns[FINISH] = "failed" if failed else (state.finish_reason or "none")
    columns[TRUNCATED] = state.finish_reason == "length"
    # the token ids when the server sent them, else its usage counts for a request of this sample
    usage = state.extra_fields.get("usage") or {}
    response_tokens = len(state.response_ids) if state.response_ids is not None else None
    prompt_tokens = len(state.prompt_ids) if state.prompt_ids is not None else None
    for column, count in (
        (RESPONSE_TOKENS, response_tokens if response_tokens is not None else usage.get("completion_tokens")),
        (PROMPT_TOKENS, prompt_tokens if prompt_tokens is not None else usage.get("prompt_tokens")),
    ):
        if count is not None:
            columns[column] = count
    state.extra_fields["columns"] = columns


def _reason(message: str) -> str:
    text = " ".join(message.split())
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 3] + "..."


def generation_summary(states: Sequence[RolloutState]) -> dict[str, dict[str, Any]]:
    """Per data_source: samples, stop, length, other finishes, generation failures, the mean and
    max response tokens (over the samples whose token ids are known, counted in ``with_tokens``)
    and the top failure reasons (generation or judging) as ``[reason, count]`` pairs."""
    by_source: dict[str, list[RolloutState]] = {}
    for state in states:
        by_source.setdefault(data_source_name(state.data_source), []).append(state)
    out: dict[str, dict[str, Any]] = {}
    for name, group in by_source.items():
        finishes: Counter[str] = Counter()
        reasons: Counter[str] = Counter()
        lengths: list[int] = []
        for state in group:
            columns = state.extra_fields.get("columns") or {}
            finishes[str(columns.get(FINISH) or state.finish_reason or "none")] += 1
            tokens = columns.get(RESPONSE_TOKENS)
            if state.response_ids is not None:
                tokens = len(state.response_ids)
            if isinstance(tokens, int) and not isinstance(tokens, bool):
                lengths.append(tokens)
            if state.error_msg and (state.reward is None or "judge_failure" in state.extra_fields):
                reasons[_reason(state.error_msg)] += 1
        other = {k: v for k, v in finishes.items() if k not in ("stop", "length", "failed")}
        out[name] = {
            "samples": len(group),
            "stop": finishes["stop"],
            "length": finishes["length"],
            "other_finishes": other,
            "generation_failed": finishes["failed"],
            "with_tokens": len(lengths),
            "mean_response_tokens": round(sum(lengths) / len(lengths), 1) if lengths else 0.0,
            "max_response_tokens": max(lengths, default=0),
            "top_failure_reasons": [[r, c] for r, c in reasons.most_common(TOP_REASONS)],
        }
    return out


def render_generation(summary: dict[str, dict[str, Any]], console: Any) -> None:
    """The generation table, then each data_source's top failure reasons."""
    from rich.table import Table

    table = Table(title="generation", title_justify="left")
    for column in ("data_source", "samples", "stop", "length", "other", "gen failed", "mean tokens", "max"):
        table.add_column(column, justify="left" if column == "data_source" else "right")
    for name, row in summary.items():
        other = ", ".join(f"{k} {v}" for k, v in sorted(row["other_finishes"].items())) or "0"
        tokens = f"{row['mean_response_tokens']:.1f}" if row["with_tokens"] else "n/a (no ids)"
        table.add_row(
            name,
            str(row["samples"]),
            str(row["stop"]),
            str(row["length"]),
            other,
            str(row["generation_failed"]),
            tokens,
            str(row["max_response_tokens"]),
        )
    console.print(table)
    for name, row in summary.items():
        for reason, count in row["top_failure_reasons"]:
            console.print(f"  {name}: {count} x {reason}")
