"""``judger score --html``: one self-contained HTML file with the report, its plots and examples.

Everything the page needs (the viewer's script and style, KaTeX with its fonts, uPlot) is inlined,
so the file opens with no network, attached to a PR or a run log. The samples are fed to a
:class:`ReportSample` as they are scored (any number of calls to :meth:`ReportSample.add`), which
keeps only what the page shows: every score (for the histogram), a fixed-size random sample of
(length, score) points, the failure reasons counted, and the first few right, wrong, failed and
timed-out samples of each data_source.
"""

from __future__ import annotations

import base64
import html
import json
import random
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from judger.cli.report import _prompt_text
from judger.cli.viewer import ASSETS
from judger.cli.viewer.columns import finish_of
from judger.cli.viewer.index import SKIPPED, VERDICTS, _json_text, plot_data, verdict_of
from judger.core.outputs import finite_number
from judger.core.rollout import RolloutState, Status
from judger.trainer.io import json_default
from judger.trainer.metrics import data_source_name


class ReportSample:
    """What the HTML report keeps of the scored samples (bounded, whatever their number)."""

    def __init__(self, per_verdict: int = 5, points: int = 2000, text_chars: int = 4000) -> None:
        self.per_verdict = per_verdict
        self.points = points
        self.text_chars = text_chars
        self.seen = 0
        self._scores: dict[str, list[float]] = {}
        self._points: dict[str, list[tuple[int, float]]] = {}
        self._scored: dict[str, int] = {}
        self._reasons: dict[str, dict[str, int]] = {}
        self._examples: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._rng = random.Random(0)

    def add(self, states: Iterable[RolloutState]) -> None:
        for state in states:
            self.seen += 1
            name = data_source_name(state.data_source)
            verdict = verdict_of(state)
            score = finite_number((state.reward or {}).get("score"))
            if score is not None:
                self._scores.setdefault(name, []).append(score)
                self._reservoir(name, (len(state.response or ""), score))
            if verdict != SKIPPED and state.status == Status.FAILED:
                reasons = self._reasons.setdefault(name, {})
                reason = state.error_msg or "?"
                reasons[reason] = reasons.get(reason, 0) + 1
            if verdict != SKIPPED:
                shown = self._examples.setdefault((name, VERDICTS[verdict]), [])
                if len(shown) < self.per_verdict:
                    shown.append(self._example(state, name, verdict))

    def _reservoir(self, name: str, point: tuple[int, float]) -> None:
        # a uniform sample of every scored sample, of fixed size (reservoir sampling)
        kept = self._points.setdefault(name, [])
        seen = self._scored[name] = self._scored.get(name, 0) + 1
        if len(kept) < self.points:
            kept.append(point)
        else:
            j = self._rng.randrange(seen)
            if j < self.points:
                kept[j] = point

    def _example(self, state: RolloutState, name: str, verdict: int) -> dict[str, Any]:
        reward = state.reward or {}
        response = state.response or ""
        if len(response) > self.text_chars:
            response = "…" + response[-self.text_chars :]
        finish, truncated = finish_of(state)
        return {
            "id": self.seen - 1,
            "row": self.seen,
            "response_index": 0,
            "data_source": name,
            "verdict": VERDICTS[verdict],
            "score": finite_number(reward.get("score")),
            "acc": reward.get("acc"),
            "pred": _json_text(reward.get("pred")),
            "length": len(state.response or ""),
            "reason": state.error_msg if state.status == Status.FAILED else None,
            "finish": finish,
            "truncated": truncated,
            "prompt": _prompt_text(state)[: self.text_chars],
            "ground_truth": _json_text(state.ground_truth),
            "response": response,
        }

    def payload(self, summary: dict[str, Any]) -> dict[str, Any]:
        """The data the page renders: the report, failure reasons, plots and examples."""
        plots = {}
        for name in summary["data_sources"]:
            points = self._points.get(name, [])
            plots[name] = plot_data(
                summary,
                name,
                np.asarray(self._scores.get(name, []), dtype=np.float64),
                np.asarray([p[0] for p in sorted(points)], dtype=np.int64),
                np.asarray([p[1] for p in sorted(points)], dtype=np.float64),
            )
        reasons = {
            name: [{"reason": r, "count": c} for r, c in sorted(found.items(), key=lambda kv: -kv[1])[:10]]
            for name, found in self._reasons.items()
        }
        examples = [
            example
            for name in summary["data_sources"]
            for verdict in ("wrong", "failed", "timed_out", "right")
            for example in self._examples.get((name, verdict), [])
        ]
        return {"summary": summary, "failure_reasons": reasons, "plots": plots, "examples": examples}


def _inline_fonts(css: str, folder: Path) -> str:
    """KaTeX's CSS with its woff2 fonts as data: URIs and the other formats dropped (never fetched)."""
    css = re.sub(r',url\(fonts/[^)]+\.(?:woff|ttf)\) format\("[a-z]+"\)', "", css)

    def data_uri(match: re.Match[str]) -> str:
        font = base64.b64encode((folder / "fonts" / match.group(1)).read_bytes()).decode("ascii")
        return f"url(data:font/woff2;base64,{font})"

    return re.sub(r"url\(fonts/([A-Za-z0-9_-]+\.woff2)\)", data_uri, css)


def _script(text: str) -> str:
    # a script's text ends at the first "</script": escape it inside the inlined code
    return "<script>" + text.replace("</script", "<\\/script") + "</script>"


def render_html(summary: dict[str, Any], sample: ReportSample, title: str = "judger score") -> str:
    """The report as one HTML document that fetches nothing."""
    vendor = ASSETS / "vendor"
    katex_css = _inline_fonts((vendor / "katex" / "katex.min.css").read_text(), vendor / "katex")
    styles = [katex_css, (vendor / "uplot" / "uPlot.min.css").read_text(), (ASSETS / "style.css").read_text()]
    scripts = [
        (vendor / "katex" / "katex.min.js").read_text(),
        (vendor / "uplot" / "uPlot.iife.min.js").read_text(),
    ]
    # "<" escaped: the JSON cannot close the script element it sits in, whatever the model wrote
    data = json.dumps(sample.payload(summary), ensure_ascii=False, default=json_default).replace(
        "<", "\\u003c"
    )
    name = html.escape(str(summary.get("input", "")))
    return "\n".join(
        [
            "<!doctype html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>{html.escape(title)}: {name}</title>",
            '<link rel="icon" href="data:,">',
            *(f"<style>{css}</style>" for css in styles),
            *(_script(js) for js in scripts),
            "</head><body>",
            f"<header><h1>{html.escape(title)}</h1><span id='files'>{name}</span></header>",
            "<main><section id='summary'></section>",
            f"<h2>examples (at most {sample.per_verdict} per verdict and data_source)</h2>",
            "<section id='examples' class='cards'></section></main>",
            _script(f"window.JUDGER_REPORT = {data};"),
            _script((ASSETS / "richtext.js").read_text()),
            _script((ASSETS / "app.js").read_text()),
            "</body></html>",
        ]
    )


def write_html(
    path: str | Path, summary: dict[str, Any], sample: ReportSample, title: str = "judger score"
) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_html(summary, sample, title), encoding="utf-8")


def write_report(
    path: str | Path, summary: dict[str, Any], states: Iterable[RolloutState], command: str = "judger score"
) -> bool:
    """``judger score|eval --html PATH``: the report of ``states``; False (said on stderr) if not written."""
    sample = ReportSample()
    sample.add(states)
    return write_sample_report(path, summary, sample, command)


def write_sample_report(
    path: str | Path, summary: dict[str, Any], sample: ReportSample, command: str = "judger score"
) -> bool:
    """The report of a sample filled as rows streamed by; False (said on stderr) if not written."""
    import sys

    try:
        write_html(path, summary, sample, title=command)
    except Exception as exc:
        print(f"{command}: cannot write {path}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return False
    return True
