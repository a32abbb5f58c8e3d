"""Counting a per-sample event and logging only some occurrences of it.

A warning per sample is a warning a policy can multiply: one that writes a stalling or failing
answer in every sample would write a log line per sample. ``SparseLog`` logs the first few, then
the 2^k-th, always with the count so far, so a run full of them still says how many.
"""

from __future__ import annotations

import threading


class SparseLog:
    """``tick()`` counts one occurrence and returns the count when this one should be logged."""

    def __init__(self, first: int = 1) -> None:
        self.first = first
        self.count = 0
        self._lock = threading.Lock()  # ticks come from judging threads and lanes at once

    def tick(self) -> int | None:
        with self._lock:
            self.count += 1
            n = self.count
        return n if n <= self.first or n & (n - 1) == 0 else None
