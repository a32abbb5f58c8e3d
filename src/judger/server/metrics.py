"""Counters and a latency histogram for ``judger serve``, rendered in Prometheus' text format.

Written by hand (no ``prometheus_client`` dependency). One process, one event loop: plain integer
updates need no lock. With ``--workers N`` each worker keeps and serves its own numbers.
"""

from __future__ import annotations

import bisect
import time
from collections import defaultdict
from collections.abc import Iterable

LATENCY_BUCKETS: tuple[float, ...] = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip

Labels = tuple[tuple[str, str], ...]

# Label values come from server-side facts (judger names, outcomes, verdicts of an LLM verifier);
# each label still keeps at most this many distinct values, the rest count as "other", so no input
# can grow /metrics without bound.
MAX_LABEL_VALUES = 64
MAX_LABEL_CHARS = 64
OUTCOMES = frozenset({"ok", "error", "timeout"})


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _fmt_labels(labels: Labels, extra: Labels = ()) -> str:
    items = labels + extra
    if not items:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in items) + "}"


def _fmt_value(value: float) -> str:
    if value == float("inf"):
        return "+Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


class _Histogram:
    __slots__ = ("count", "counts", "total")

    def __init__(self, n: int) -> None:
        self.counts = [0] * (n + 1)  # last slot: above every bound
        self.count = 0
        self.total = 0.0


class ServerMetrics:
    """What ``GET /metrics`` reports.

    - ``judger_http_requests_total{endpoint,code}``: HTTP requests answered, by status code
    - ``judger_http_request_duration_seconds{endpoint}``: latency histogram
    - ``judger_http_rejected_total{reason}``: overload (503), too_large (413), body_not_taken
      (413), unauthorized (401), client_limit and client_bytes (429), body_timeout (408)
    - ``judger_http_in_flight``: judge requests being served now
    - ``judger_samples_total{judger,outcome}``: samples judged: ok, error or timeout
    - ``judger_verdicts_total{judger,verdict}``: rewards carrying a ``verdict`` (LLM verifiers)

    ``judger`` and ``verdict`` keep at most :data:`MAX_LABEL_VALUES` distinct values each (later
    ones count as ``other``); ``outcome`` is one of :data:`OUTCOMES`.
    """

    def __init__(self, buckets: Iterable[float] = LATENCY_BUCKETS) -> None:
        self.buckets = tuple(sorted(buckets))
        self.requests: defaultdict[Labels, int] = defaultdict(int)
        self.latency: dict[Labels, _Histogram] = {}
        self.rejected: defaultdict[Labels, int] = defaultdict(int)
        self.samples: defaultdict[Labels, int] = defaultdict(int)
        self.verdicts: defaultdict[Labels, int] = defaultdict(int)
        self.in_flight = 0
        self.started = time.time()
        self._seen: defaultdict[str, set[str]] = defaultdict(set)

    def _bounded(self, label: str, value: str) -> str:
        seen = self._seen[label]
        if value in seen:
            return value
        if len(seen) >= MAX_LABEL_VALUES or len(value) > MAX_LABEL_CHARS:
            return "other"
        seen.add(value)
        return value

    def observe_request(self, endpoint: str, code: int, seconds: float) -> None:
        self.requests[(("endpoint", endpoint), ("code", str(code)))] += 1
        key: Labels = (("endpoint", endpoint),)
        hist = self.latency.get(key)
        if hist is None:
            hist = self.latency[key] = _Histogram(len(self.buckets))
        hist.counts[bisect.bisect_left(self.buckets, seconds)] += 1
        hist.count += 1
        hist.total += seconds

    def reject(self, reason: str) -> None:
        self.rejected[(("reason", reason),)] += 1

    def sample(self, judger: str, outcome: str, verdict: object = None, n: int = 1) -> None:
        """Count ``n`` samples of ``judger`` with ``outcome`` (and ``verdict``, when a string)."""
        judger = self._bounded("judger", judger)
        self.samples[(("judger", judger), ("outcome", outcome if outcome in OUTCOMES else "error"))] += n
        if isinstance(verdict, str):
            self.verdicts[(("judger", judger), ("verdict", self._bounded("verdict", verdict)))] += n

    def render(self) -> str:
        """The exposition text (format 0.0.4)."""
        out: list[str] = []

        def counter(name: str, help_text: str, values: dict[Labels, int]) -> None:
            out.append(f"# HELP {name} {help_text}")
            out.append(f"# TYPE {name} counter")
            for labels, value in sorted(values.items()):
                out.append(f"{name}{_fmt_labels(labels)} {value}")

        counter(
            "judger_http_requests_total",
            "HTTP requests answered, by endpoint and status code.",
            self.requests,
        )
        name = "judger_http_request_duration_seconds"
        out.append(f"# HELP {name} Time to answer an HTTP request.")
        out.append(f"# TYPE {name} histogram")
        for labels, hist in sorted(self.latency.items()):
            cumulative = 0
            for bound, n in zip((*self.buckets, float("inf")), hist.counts):
                cumulative += n
                out.append(f"{name}_bucket{_fmt_labels(labels, (('le', _fmt_value(bound)),))} {cumulative}")
            out.append(f"{name}_sum{_fmt_labels(labels)} {hist.total!r}")
            out.append(f"{name}_count{_fmt_labels(labels)} {hist.count}")
        counter("judger_http_rejected_total", "Requests refused before judging, by reason.", self.rejected)
        out.append("# HELP judger_http_in_flight Judge requests being served now.")
        out.append("# TYPE judger_http_in_flight gauge")
        out.append(f"judger_http_in_flight {self.in_flight}")
        counter(
            "judger_samples_total",
            "Samples judged, by judger and outcome (ok, error, timeout).",
            self.samples,
        )
        counter(
            "judger_verdicts_total", "Rewards that carry a verdict, by judger and verdict.", self.verdicts
        )
        out.append("# HELP judger_process_start_time_seconds Start time of the server, Unix seconds.")
        out.append("# TYPE judger_process_start_time_seconds gauge")
        out.append(f"judger_process_start_time_seconds {self.started!r}")
        return "\n".join(out) + "\n"
