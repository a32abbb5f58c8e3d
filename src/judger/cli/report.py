"""How a scoring run's samples read in its report (failure kinds and reasons, the @N headline,
examples), and the report drawn with rich: :func:`render_summary` and :func:`render_examples`.

The summary itself (the JSON-ready dict ``judger score --format json`` prints) is built in one
place, :class:`judger.cli.tally.Tally` (:func:`judger.cli.tally.summarize` for a list of states).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from judger.core.rollout import RolloutState, Status
from judger.trainer.metrics import data_source_name

AT_N = ("mean", "best", "maj", "pass")


def failure_kind(state: RolloutState) -> str | None:
    """``"error"`` or ``"timeout"`` for a sample that failed to be judged, else None."""
    failure = state.extra_fields.get("judge_failure")
    if state.status != Status.FAILED or not isinstance(failure, dict):
        return None
    return "timeout" if failure.get("kind") == "timeout" else "error"


TOP_REASONS = 3


# where in its batch a sample failed says nothing about why: left out, equal reasons count together
_BATCH_INDEX = re.compile(r" \(batch index \d+\)")


def failure_reason(state: RolloutState) -> str:
    """A failed sample's reason: the first line of its error message, cut to 200 characters."""
    lines = (state.error_msg or "").strip().splitlines()
    return shorten(_BATCH_INDEX.sub("", lines[0]), 200) if lines else "no reason recorded"


def top_reasons(states: Sequence[RolloutState], top: int = TOP_REASONS) -> list[dict[str, Any]]:
    """The ``top`` most common reasons among the samples that failed to be judged, with counts."""
    return top_reasons_of(Counter(failure_reason(s) for s in states if failure_kind(s) is not None), top)


def top_reasons_of(counts: Counter[str], top: int = TOP_REASONS) -> list[dict[str, Any]]:
    return [{"reason": reason, "count": count} for reason, count in counts.most_common(top)]


def _at_n(var2metric: dict[str, dict[str, float]]) -> dict[str, Any] | None:
    """The headline @N metrics: of ``acc`` (else ``score``) at the largest group size N > 1."""
    var = "acc" if "acc" in var2metric else "score" if "score" in var2metric else None
    if var is None:
        return None
    metrics = var2metric[var]
    sizes = [int(name[len("mean@") :]) for name in metrics if name.startswith("mean@")]
    sizes = [n for n in sizes if n > 1]
    if not sizes:
        return None
    n = max(sizes)
    return {
        "n": n,
        "variable": var,
        "mean": metrics.get(f"mean@{n}"),
        "best": metrics.get(f"best@{n}/mean"),
        "maj": metrics.get(f"maj@{n}/mean"),
        "pass": metrics.get(f"pass@{n}"),
    }


# --- examples -------------------------------------------------------------------------------------


def shorten(text: Any, limit: int, *, keep: str = "head") -> str:
    """``text`` on one line, cut to about ``limit`` characters; ``keep="tail"`` keeps the end (answers)."""
    text = "" if text is None else " ".join(str(text).split())
    if len(text) <= limit:
        return text
    if keep == "tail":
        return "…" + text[-limit:]
    head = text[:limit]
    # at a word's end where one is near: a reason cut mid-word reads as a different word
    cut = head.rfind(" ", limit * 3 // 4)
    return (head[:cut] if cut > 0 else head) + " …"


def _short_value(value: Any, limit: int) -> Any:
    return shorten(value, limit) if isinstance(value, str) else value


def _prompt_text(state: RolloutState) -> str:
    for message in reversed(state.message):
        if message.get("role") == "user":
            return str(message.get("content", ""))
    return str(state.message[-1].get("content", "")) if state.message else ""


def examples(
    states: Sequence[RolloutState], k: int, *, prompt_chars: int = 300, response_chars: int = 300
) -> list[dict]:
    """The first ``k`` samples of each data_source, as the fields worth eyeballing before training."""
    out: list[dict[str, Any]] = []
    taken: dict[str, int] = {}
    for state in states:
        name = data_source_name(state.data_source)
        if taken.get(name, 0) >= k:
            continue
        taken[name] = taken.get(name, 0) + 1
        reward = state.reward or {}
        out.append(
            {
                "data_source": name,
                "prompt": shorten(_prompt_text(state), prompt_chars),
                "response": shorten(state.response, response_chars, keep="tail"),
                "ground_truth": _short_value(state.ground_truth, prompt_chars),
                "pred": _short_value(reward.get("pred"), prompt_chars),
                "score": reward.get("score"),
                "acc": reward.get("acc"),
                "status": state.status.value,
                "error": state.error_msg,
            }
        )
    return out


# --- rendering ------------------------------------------------------------------------------------


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


# a console narrower than this gets the @N columns in a table of their own: one table of all of
# them squeezes the numbers to "0.…"
_ONE_TABLE_WIDTH = 110


def _caption(summary: dict[str, Any]) -> str:
    rate = summary["samples_per_s"]
    caption = f"{summary['samples']} samples in {summary['elapsed_s']:.1f} s ({_fmt(rate, 1)} samples/s)"
    if summary["skipped"]:
        caption += f"; {summary['skipped']} not judged (status not completed)"
    if summary["bad_rows"]:
        caption += f"; {summary['bad_rows']} unreadable input row(s) skipped"
    return caption


def _new_table(title: str | None, caption: str | None) -> Any:
    from rich.table import Table

    table = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
    table.add_column("data_source", overflow="fold", max_width=40)
    return table


def _number_column(table: Any, name: str) -> None:
    # numbers never shrink: the data_source column folds instead
    table.add_column(name, justify="right", no_wrap=True, min_width=max(len(name), 5))


def _total_cells(summary: dict[str, Any]) -> list[str]:
    """The "all" row over several data_sources: the score is the mean over every judged sample."""
    judged = [v for v in summary["data_sources"].values() if v["mean_score"] is not None]
    weight = sum(v["judged"] for v in judged)
    mean_score = sum(v["mean_score"] * v["judged"] for v in judged) / weight if weight else None
    return [
        "all",
        str(summary["samples"]),
        str(summary["failed"]),
        str(summary["timed_out"]),
        _fmt(mean_score),
        "",
    ]


def render_summary(summary: dict[str, Any], console: Any, title: str = "judger score") -> None:
    """Draw the per-data_source table on a rich Console, then the top failure reasons per source."""
    ns = {v["at_n"]["n"] for v in summary["data_sources"].values() if v["at_n"]}
    suffix = f"@{ns.pop()}" if len(ns) == 1 else "@N"
    caption = _caption(summary)
    split = (getattr(console, "width", None) or _ONE_TABLE_WIDTH) < _ONE_TABLE_WIDTH
    has_at_n = any(v["at_n"] for v in summary["data_sources"].values())

    table = _new_table(title, None if split and has_at_n else caption)
    for name in ("samples", "failed", "timeout", "score", "acc"):
        _number_column(table, name)
    at_n_table = _new_table(None, caption) if split and has_at_n else table
    if suffix == "@N":
        _number_column(at_n_table, "N")
    for name in AT_N:
        _number_column(at_n_table, name + suffix)
    for name, row in summary["data_sources"].items():
        at_n = row["at_n"] or {}
        cells = [
            name,
            str(row["samples"]),
            str(row["failed"]),
            str(row["timed_out"]),
            _fmt(row["mean_score"]),
            _fmt(row["accuracy"]),
        ]
        at_n_cells = [_fmt(at_n.get("n"))] if suffix == "@N" else []
        at_n_cells += [_fmt(at_n.get(m)) for m in AT_N]
        if at_n_table is table:
            table.add_row(*cells, *at_n_cells)
        else:
            table.add_row(*cells)
            at_n_table.add_row(name, *at_n_cells)
    if len(summary["data_sources"]) > 1:
        total = _total_cells(summary)
        if at_n_table is table:
            total += [""] * (len(AT_N) + (1 if suffix == "@N" else 0))
        table.add_section()
        table.add_row(*total, style="bold")
    console.print(table)
    if at_n_table is not table:
        console.print(at_n_table)
    render_failure_reasons(summary, console)


def render_failure_reasons(summary: dict[str, Any], console: Any) -> None:
    """Why samples failed, per data_source: the most common reasons, with counts."""
    from rich.markup import escape

    sources = [(name, row) for name, row in summary["data_sources"].items() if row.get("failure_reasons")]
    if not sources:
        return
    console.print("failure reasons (most common first):")
    for name, row in sources:
        failed = row["failed"] + row["timed_out"]
        console.print(f"  {escape(name)}: {failed} failed")
        for item in row["failure_reasons"]:
            console.print(f"    {item['count']} x {escape(item['reason'])}", overflow="fold")


def render_examples(rows: Sequence[dict[str, Any]], console: Any) -> None:
    """Draw examples as one small panel each."""
    from rich.markup import escape
    from rich.panel import Panel
    from rich.text import Text

    for row in rows:
        body = Text()
        for key in ("prompt", "response", "ground_truth", "pred", "score", "acc"):
            body.append(f"{key}: ", style="bold")
            body.append(f"{_fmt(row[key])}\n")
        if row["error"]:
            body.append("error: ", style="bold red")
            body.append(f"{row['error']}\n")
        console.print(
            Panel(body, title=escape(f"{row['data_source']} [{row['status']}]"), title_align="left")
        )


@contextmanager
def progress_bar(
    label: str,
    total: int | None,
    console: Any = None,
    *,
    enabled: bool = True,
    status: Callable[[], str] | None = None,
) -> Iterator[Callable[[int], None]]:
    """``with progress_bar("scoring", n) as advance: ... advance(k)``: a transient bar on stderr, or a
    no-op when ``enabled`` is False (rich is imported only when a bar is drawn). ``total=None``:
    a count with no end known (rows of a file read as it streams). ``status()``, asked at every
    refresh, is shown after the count (where the work runs: "2 nodes, 8 actors")."""
    if not enabled:
        yield lambda k: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.text import Text

    class StatusColumn(ProgressColumn):
        def render(self, task: Any) -> Text:
            return Text(status() if status is not None else "")

    columns: list[ProgressColumn] = [TextColumn(label), BarColumn(), MofNCompleteColumn()]
    if status is not None:
        columns.append(StatusColumn())
    columns.append(TimeElapsedColumn())
    with Progress(*columns, console=console or Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda k: bar.advance(task, k)
