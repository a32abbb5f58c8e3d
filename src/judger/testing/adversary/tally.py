"""Counting what a grader pays: near misses paid and honest siblings paid, per rule."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from judger.testing.adversary.cases import NearMiss

Grader = Callable[[str, str, str], bool]
"""``grader(prompt, response, gold) -> bool``: whether the response is paid."""


class BatchGrader(Protocol):
    """A grader that is faster on a whole list (a judger: one ``batch_judge``)."""

    def grade_many(self, cases: Sequence[NearMiss]) -> list[bool]: ...


@dataclass
class Tally:
    """One rule's counts against one grader."""

    near_misses: int = 0
    honest: int = 0
    paid_near_misses: list[NearMiss] = field(default_factory=list)
    unpaid_honest: list[NearMiss] = field(default_factory=list)

    @property
    def near_misses_paid(self) -> int:
        return len(self.paid_near_misses)

    @property
    def honest_paid(self) -> int:
        return self.honest - len(self.unpaid_honest)

    def add(self, case: NearMiss, paid: bool) -> None:
        if case.paid_if_honest:
            self.honest += 1
            if not paid:
                self.unpaid_honest.append(case)
        else:
            self.near_misses += 1
            if paid:
                self.paid_near_misses.append(case)


def grade(grader: Grader | BatchGrader, cases: Sequence[NearMiss]) -> list[bool]:
    """The grader's verdict on each case (through ``grade_many`` where it has one)."""
    many = getattr(grader, "grade_many", None)
    if callable(many):
        verdicts = [bool(v) for v in many(cases)]
        if len(verdicts) != len(cases):
            raise ValueError(f"grade_many gave {len(verdicts)} verdicts for {len(cases)} cases")
        return verdicts
    single: Grader = grader  # type: ignore[assignment]
    return [bool(single(c.prompt, c.response, c.gold)) for c in cases]


def tally(cases: Sequence[NearMiss], verdicts: Sequence[bool]) -> dict[str, Tally]:
    """Per rule, in the order rules first appear: what was paid of ``cases`` given ``verdicts``."""
    out: dict[str, Tally] = {}
    for case, paid in zip(cases, verdicts, strict=True):
        out.setdefault(case.rule, Tally()).add(case, bool(paid))
    return out


def run(grader: Grader | BatchGrader, cases: Iterable[NearMiss]) -> dict[str, Tally]:
    """Play ``cases`` against ``grader``: per rule, near misses paid / total and honest paid / total."""
    listed = list(cases)
    return tally(listed, grade(grader, listed))


def _shown(case: NearMiss) -> str:
    response = case.response if len(case.response) <= 160 else "…" + case.response[-160:]
    prompt = "" if len(case.prompt) > 80 else f" [prompt: {case.prompt!r}]"
    return f"gold {case.gold!r}: {response!r} ({case.note}){prompt}"


def report(tallies: dict[str, Tally], *, details: bool = True) -> str:
    """A table of the counts, then (``details``) every paid near miss and every unpaid honest case."""
    lines = ["rule        near misses paid   honest paid"]
    for rule, t in tallies.items():
        lines.append(
            f"{rule:<11} {t.near_misses_paid:>5} / {t.near_misses:<8} {t.honest_paid:>5} / {t.honest}"
        )
    if details:
        for rule, t in tallies.items():
            lines += [f"{rule}: near miss PAID: {_shown(c)}" for c in t.paid_near_misses]
            lines += [f"{rule}: honest NOT paid: {_shown(c)}" for c in t.unpaid_honest]
    return "\n".join(lines)
