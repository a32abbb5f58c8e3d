"""Reading a grader's reply: which verdict letter it gave, or a clear failure when it gave none or
several."""

from __future__ import annotations

import re
from collections.abc import Callable

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
# the reply's last line ("A", "**A**", "(A).", "A: CORRECT"). A letter that starts a sentence is
# not a verdict ("Final Judgment: a wrong answer, so B" holds none).
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


def outside_reasoning(reply: str) -> str:
    """The part of ``reply`` that is not reasoning: after the last ``</think>``, and before a
    ``<think>`` left open (its reasoning never ended, so no verdict follows it)."""
    return committed_text(reply)


def _verdicts(text: str) -> list[str]:
    """Every verdict the grammar finds in ``text``; a named one ("A: INCORRECT") that contradicts
    its letter counts as both."""
    found = _BOXED.findall(text)
    for match in _FINAL.finditer(text):
        found.append(match.group(1))
        found += [_NAMES[name] for name in match.groups()[1:] if name]
    lines = [line for line in text.splitlines() if line.strip()]
    if lines:
        alone = _LINE.fullmatch(lines[-1])
        if alone is not None:
            found.append(alone.group(1))
            found += [_NAMES[name] for name in alone.groups()[1:] if name]
    return found


def parse_compass_verdict(reply: str) -> str | None:
    """CompassVerifier's verdict under a strict grammar, or None when there is none to trust.

    A verdict is ``\\boxed{A|B|C}``, the letter after "Final Judgment:" ending its line (the
    letter in upper case; "A.", "**A**", "(A)" and "A: CORRECT" as well), or the letter alone on the
    reply's last line. Reasoning (``<think>...</think>``, or an unclosed ``<think>``) and echoed
    sections of the grading prompt (which hold the candidate's own text) are not read. Two
    different verdicts, or a letter whose name disagrees ("A: INCORRECT"), give None: a judge
    failure, never a guess a policy could steer by writing verdicts into its answer.
    """
    found = set(_verdicts(_ECHOES.sub("\n", outside_reasoning(reply))))
    return found.pop() if len(found) == 1 else None


def regex_parser(pattern: str) -> VerdictParser:
    """A parser taking the first group (or the whole match) of the pattern's matches outside the
    reasoning; None when there are none, or when they disagree."""
    compiled = re.compile(pattern)

    def parse(reply: str) -> str | None:
        text = outside_reasoning(reply)
        found = {m.group(1) if compiled.groups else m.group(0) for m in compiled.finditer(text)}
        return found.pop() if len(found) == 1 else None

    parse.__qualname__ = f"regex_parser({pattern!r})"
    return parse


def resolve_parser(parser: VerdictParser | str | None, pattern: str | None) -> VerdictParser:
    """The parser a config asks for: a function, an import string, a regex, or CompassVerifier's."""
    if parser is not None and pattern is not None:
        raise ValueError("give verdict_parser or verdict_pattern, not both")
    if pattern is not None:
        return regex_parser(pattern)
    if parser is None:
        return parse_compass_verdict
    if isinstance(parser, str):
        parser = import_object(parser)
    if not callable(parser):
        raise TypeError(f"verdict_parser must be callable or an import string, got {type(parser).__name__}")
    return parser
