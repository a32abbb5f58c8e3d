"""The rows of an input that could not be read, kept within a bound whatever their number.

A file of a million bad lines is a mistake to report, not a million messages to hold: the first
rows' errors say what is wrong (the same mistake, as a rule, on every line), and the count says how
much of the file it cost. So a :class:`BadRows` keeps the first :data:`KEPT` errors and counts the
rest; its length is the count, iterating it gives the errors kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import overload

from judger.trainer.io import RowError

KEPT = 100


class BadRows:
    """The first ``kept`` :class:`RowError` of a run, and how many rows failed in all."""

    def __init__(self, kept: int = KEPT) -> None:
        self.kept = kept
        self.count = 0
        self._first: list[RowError] = []

    def append(self, error: RowError) -> None:
        self.count += 1
        if len(self._first) < self.kept:
            self._first.append(error)

    def extend(self, errors: Iterable[RowError]) -> None:
        for error in errors:
            self.append(error)

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[RowError]:
        return iter(self._first)

    @overload
    def __getitem__(self, index: int) -> RowError: ...
    @overload
    def __getitem__(self, index: slice) -> list[RowError]: ...
    def __getitem__(self, index: int | slice) -> RowError | list[RowError]:
        return self._first[index]
