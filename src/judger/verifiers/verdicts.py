"""Reading a grader's reply: which verdict letter it gave, or a clear failure when it gave none."""

from __future__ import annotations

import re
from collections.abc import Callable

from judger.core.errors import VerdictParseError as VerdictParseError  # re-exported
from judger.judgers.handlers import import_object

VerdictParser = Callable[[str], "str | None"]

_BOXED = re.compile(r"\\boxed\{\s*([A-C])\s*\}")
_BARE = re.compile(r"\s*[(*\[]*\s*([A-C])\s*[)*\].:]*\s*")
_FINAL = re.compile(r"Final\s+Judg(?:e)?ment\s*:?\s*[*(\[\s]*([A-C])\b", re.IGNORECASE)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


def parse_compass_verdict(reply: str) -> str | None:
    """CompassVerifier's rules: the last ``\\boxed{A|B|C}``; else a reply that is just the letter;
    else the last letter after "Final Judgment:". None when there is no verdict.

    A reasoning model's ``<think>...</think>`` block is dropped first, so a letter mentioned while
    thinking is never taken for the verdict.
    """
    text = _THINK.sub("", reply)
    boxed = _BOXED.findall(text)
    if boxed:
        return boxed[-1]
    bare = _BARE.fullmatch(text)
    if bare:
        return bare.group(1)
    final = _FINAL.findall(text)
    if final:
        return final[-1].upper()
    return None


def regex_parser(pattern: str) -> VerdictParser:
    """A parser taking the first group (or the whole match) of the pattern's last match."""
    compiled = re.compile(pattern)

    def parse(reply: str) -> str | None:
        matches = list(compiled.finditer(reply))
        if not matches:
            return None
        last = matches[-1]
        return last.group(1) if compiled.groups else last.group(0)

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
