"""Reading a grader's reply: which verdict it gave, or a failure saying which rule found none, or
which verdicts disagreed. A verdict is never guessed: a reply that gives two is a judge failure."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from judger.core.errors import VerdictParseError as VerdictParseError  # re-exported
from judger.judgers.handlers import import_object
from judger.scorers.committed import committed_text
from judger.verifiers.prompts import (
    GOLD_BEGIN,
    GOLD_END,
    QUESTION_BEGIN,
    QUESTION_END,
    RESPONSE_BEGIN,
    RESPONSE_END,
)

VerdictParser = Callable[[str], "str | None"]

_BOXED = re.compile(r"\\boxed\{\s*([A-C])\s*\}")
# where the letter may stand: after "Final Judgment:" (the phrase in any case, the letter in upper
# case) with the line ending there, going on after punctuation, or naming the verdict; or alone on
# a line ("A", "**A**", "(A).", "A:", "A: CORRECT"): the reply's last line, or its first (a model
# that opens with "A:" and then explains). A letter that starts a sentence is not a verdict
# ("Final Judgment: a wrong answer, so B" holds none, nor does "A. The answer is wrong": what follows
# the letter on its line could contradict it).
_NAME = r"(CORRECT|INCORRECT|INVALID)\b"
_DASH = r"[.:\-\u2013\u2014]"
_FINAL = re.compile(
    r"(?i:final\s+judge?ment)\s*:?[ \t]*[*(\[ \t]*([A-C])[)*\]]*[ \t]*"
    rf"(?:$|(?:{_DASH}|[,;])[ \t]*(?:{_NAME})?[^\n]*|{_NAME}[^\n]*)",
    re.MULTILINE,
)
_LINE = re.compile(rf"[ \t]*[*(\[ \t]*([A-C])[)*\]]*[ \t]*(?:{_DASH}?[ \t]*{_NAME}[^\n]*|{_DASH}?[ \t]*)")
_NAMES = {"CORRECT": "A", "INCORRECT": "B", "INVALID": "C"}
# the sections of our grading prompt: a grader that echoes them echoes the candidate's own text
_ECHOES = re.compile(
    "|".join(
        f"{re.escape(begin)}.*?(?:{re.escape(end)}|\\Z)"
        for begin, end in (
            (QUESTION_BEGIN, QUESTION_END),
            (GOLD_BEGIN, GOLD_END),
            (RESPONSE_BEGIN, RESPONSE_END),
        )
    ),
    re.DOTALL,
)


@dataclass(frozen=True)
class VerdictReading:
    """What a parser read in a reply: the verdict, or None and ``reason`` (which rule found none, or
    which verdicts disagreed)."""

    verdict: str | None
    reason: str = ""


def outside_reasoning(reply: str) -> str:
    """The part of ``reply`` that is not reasoning: after the last ``</think>``, and before a
    ``<think>`` left open (its reasoning never ended, so no verdict follows it)."""
    return committed_text(reply)


def _named(match: re.Match[str], rule: str) -> list[tuple[str, str]]:
    """The letter of a match and the verdict its name gives ("A: INCORRECT" gives A and B)."""
    found = [(match.group(1), rule)]
    found += [(_NAMES[name], f"{rule}, named {name}") for name in match.groups()[1:] if name]
    return found


@dataclass
class _Found:
    """What the grammar found in a reply: the verdicts read (with the rule that read each), letters
    alone on a middle line (they never make a verdict, but one that differs makes the reply
    ambiguous), and the lines skipped as echoes of the grading prompt."""

    read: list[tuple[str, str]]
    middle: list[tuple[str, str]]
    echoes: list[str]

    def all(self) -> list[tuple[str, str]]:
        return self.read + self.middle


def _line_verdicts(text: str, prompt_lines: frozenset[str], found: _Found) -> None:
    """Letters alone on a line: read on the last line and on the first one (unless it repeats a line
    of the grading prompt: an echo of the instructions or of the candidate's own text); on a middle
    line, kept only to refuse a reply that lists several ("A:", "B:", "C:")."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for i, line in enumerate(lines):
        match = _LINE.fullmatch(line)
        if match is None:
            continue
        last = i == len(lines) - 1
        if not last and line in prompt_lines:
            found.echoes.append(line)
        elif last or i == 0:
            found.read += _named(match, "the last line" if last else "the first line")
        else:
            found.middle += _named(match, f"line {i + 1}")


def _verdicts(text: str, prompt_lines: frozenset[str] = frozenset()) -> _Found:
    """Every (verdict, rule that found it) in ``text``."""
    found = _Found([(letter, "\\boxed{}") for letter in _BOXED.findall(text)], [], [])
    for match in _FINAL.finditer(text):
        found.read += _named(match, "Final Judgment")
    _line_verdicts(text, prompt_lines, found)
    return found


def _disagreement(found: Iterable[tuple[str, str]]) -> str:
    by_verdict: dict[str, list[str]] = {}
    for verdict, rule in found:
        by_verdict.setdefault(verdict, []).append(rule)
    said = "; ".join(f"{v} ({', '.join(dict.fromkeys(rules))})" for v, rules in sorted(by_verdict.items()))
    return f"the reply gives different verdicts: {said}; none is guessed"


def read_compass_verdict(reply: str, prompt: str = "") -> VerdictReading:
    """CompassVerifier's verdict under a strict grammar (see :func:`parse_compass_verdict`), or why
    there is none. ``prompt``, the grading prompt the reply answers, lets a first line of the reply
    that repeats one of its lines be skipped as an echo rather than read as a verdict."""
    prompt_lines = frozenset(line.strip() for line in prompt.splitlines() if line.strip())
    found = _verdicts(_ECHOES.sub("\n", outside_reasoning(reply)), prompt_lines)
    verdicts = {verdict for verdict, _ in found.all()}
    if len(verdicts) > 1:
        return VerdictReading(None, _disagreement(found.all()))
    if found.read:
        return VerdictReading(verdicts.pop())
    reason = (
        "no verdict: no \\boxed{A|B|C}, no 'Final Judgment: X' ending its line, no letter alone on "
        "the reply's first or last line"
    )
    if found.middle:
        reason += f" (a letter alone on {found.middle[0][1]} is not where the verdict stands)"
    if found.echoes:
        reason += (
            f"; {found.echoes[0][:60]!r} repeats a line of the grading prompt (an echo is not a verdict)"
        )
    elif _verdicts(re.sub(r"</?think>", "\n", reply)).read:
        reason += " outside reasoning (<think>) and echoed prompt sections"
    return VerdictReading(None, reason)


def parse_compass_verdict(reply: str) -> str | None:
    """CompassVerifier's verdict under a strict grammar, or None when there is none to trust.

    A verdict is ``\\boxed{A|B|C}``, the letter after "Final Judgment:" ending its line (the
    letter in upper case; "A.", "**A**", "(A)" and "A: CORRECT" as well), or the letter alone on the
    reply's last or first line ("A:" then an explanation). Reasoning (``<think>...</think>``, or an
    unclosed ``<think>``) and echoed sections of the grading prompt (which hold the candidate's own
    text) are not read. Two different verdicts anywhere -- a letter alone on any line counts, so a
    reply listing "A:", "B:", "C:" holds none -- or a letter whose name disagrees ("A: INCORRECT"),
    give None: a judge failure, never a guess a policy could steer by writing verdicts into its
    answer. :func:`read_compass_verdict` says why, and skips lines that echo the grading prompt.
    """
    return read_compass_verdict(reply).verdict


class RegexVerdict:
    """A parser taking the first group (or the whole match) of the pattern's matches outside the
    reasoning (leading and trailing space stripped, so ``^`` is the reply's first word); None when
    there are none, or when they disagree. A case-insensitive pattern (``(?i)``) reads ``No`` as the
    verdict key ``NO`` among ``keys``, and matches differing only in case agree."""

    def __init__(self, pattern: str, keys: Iterable[str] = ()) -> None:
        self.pattern = pattern
        self.compiled = re.compile(pattern)
        self.ignore_case = bool(self.compiled.flags & re.IGNORECASE)
        self.keys = {key.casefold(): key for key in keys} if self.ignore_case else {}
        self.__qualname__ = f"regex_parser({pattern!r})"

    def _matches(self, text: str) -> list[str]:
        matches = [m.group(1) if self.compiled.groups else m.group(0) for m in self.compiled.finditer(text)]
        found = [m for m in matches if isinstance(m, str)]  # a group that took no part is None
        return [self.keys.get(m.casefold(), m) for m in found] if self.ignore_case else found

    def read(self, reply: str, prompt: str = "") -> VerdictReading:
        text = outside_reasoning(reply).strip()
        found = self._matches(text)
        distinct = {m.casefold() if self.ignore_case else m: m for m in found}
        if len(distinct) == 1:
            return VerdictReading(found[0])
        if distinct:
            return VerdictReading(
                None,
                f"verdict_pattern {self.pattern!r} matched {sorted(set(found))}: the verdicts disagree; "
                "none is guessed",
            )
        reason = f"verdict_pattern {self.pattern!r} matched nothing in the reply"
        if self._matches(reply):
            reason += " outside its reasoning (<think>)"
        elif not self.ignore_case and re.search(self.pattern, text, re.IGNORECASE):
            reason += " (it would match case-insensitively: start the pattern with (?i))"
        return VerdictReading(None, reason)

    def __call__(self, reply: str) -> str | None:
        return self.read(reply).verdict


def regex_parser(pattern: str, keys: Iterable[str] = ()) -> RegexVerdict:
    """A parser taking the first group (or the whole match) of the pattern's matches outside the
    reasoning; None when there are none, or when they disagree (see :class:`RegexVerdict`)."""
    return RegexVerdict(pattern, keys)


def read_with(parser: VerdictParser, reply: str, prompt: str = "") -> VerdictReading:
    """``parser``'s reading of ``reply``: with its reason when it says why (the built-in ones),
    else the verdict it returned."""
    if parser is parse_compass_verdict:
        return read_compass_verdict(reply, prompt)
    if isinstance(parser, RegexVerdict):
        return parser.read(reply, prompt)
    verdict = parser(reply)
    name = getattr(parser, "__qualname__", type(parser).__name__)
    return VerdictReading(verdict, "" if verdict is not None else f"verdict_parser {name} found none")


def resolve_parser(
    parser: VerdictParser | str | None, pattern: str | None, keys: Iterable[str] = ()
) -> VerdictParser:
    """The parser a config asks for: a function, an import string, a regex (whose case-insensitive
    matches read as the verdict ``keys``), or CompassVerifier's."""
    if parser is not None and pattern is not None:
        raise ValueError("give verdict_parser or verdict_pattern, not both")
    if pattern is not None:
        return regex_parser(pattern, keys)
    if parser is None:
        return parse_compass_verdict
    if isinstance(parser, str):
        parser = import_object(parser)
    if not callable(parser):
        raise TypeError(f"verdict_parser must be callable or an import string, got {type(parser).__name__}")
    return parser
