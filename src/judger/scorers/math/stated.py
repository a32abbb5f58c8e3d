"""A final answer stated without a box: ``The answer is $\\frac{1}{2}$.``, ``Final answer: 7/5``.

Read only where the committed text has no ``\\boxed{}`` (a box always wins), and only what the
response commits to as its answer, in this order:

1. the last statement ``answer is X`` / ``answer: X`` / ``answer = X`` (``final answer``, ``the
   answer``), where X is one math span (``$...$``, ``\\(...\\)``, ``\\[...\\]``) or the rest of
   its sentence, and nothing that could be another answer (math, a digit) follows it to the end
   of the response: ``The answer is 5. Or maybe 6.`` states no answer;
2. else the last math span of the last non-empty line, or a line ending in ``= <number>``; of an
   equation (``\\binom{5}{2} = 10``) the side after the last ``=``.

Anything else is no answer. The grading that follows is the box's, so a stated hedge
(``the answer is 72 or 73``) is a list, equal to no single value.
"""

from __future__ import annotations

import re

WINDOW = 2000
"""How far from the end a stated answer is looked for."""
MAX_ANSWER = 300

_STATEMENT = re.compile(r"\banswer\b\s*(?:\bis\b\s*:?|:|=)\s*", re.IGNORECASE)
_MATH = re.compile(r"\$\$(.{1,300}?)\$\$|\$([^$]{1,300}?)\$|\\\((.{1,300}?)\\\)|\\\[(.{1,300}?)\\\]", re.S)
_SENTENCE = re.compile(r"[^\n]{1,300}?(?=\.\s|\.$|;|\n|$)")
_ANSWERISH = re.compile(r"[0-9$\\]")
_PLAIN_END = re.compile(r"=\s*(-?\d+(?:\.\d+)?(?:\s*/\s*\d+)?)\s*\.?\s*$")
_EMPHASIS = re.compile(r"\*\*|__")
_DELIMITER = re.compile(r"\$|\\[(\[]")


def _statement_value(text: str, start: int) -> tuple[str, int] | None:
    """The value after a statement that ends at ``start``, and where that value ends."""
    found = _MATH.match(text, start)
    if found is not None:
        value = next(g for g in found.groups() if g is not None)
        return value, found.end()
    found = _SENTENCE.match(text, start)
    if found is None or _DELIMITER.search(found[0]):
        return None  # prose mixed with math ("7, since $3+4=7$") is no one value
    return found[0], found.end()


def _last_statement(text: str) -> str | None:
    for found in reversed(list(_STATEMENT.finditer(text))):
        value = _statement_value(text, found.end())
        if value is None:
            return None
        answer, end = value
        if _ANSWERISH.search(text, end):
            return None  # more math follows: the statement was not the last word
        return answer
    return None


def _equation_side(math: str) -> str:
    """The side after the last ``=`` outside braces (``\\binom{5}{2} = 10`` -> ``10``)."""
    depth = 0
    cut = -1
    for i, ch in enumerate(math):
        depth += ch in "{(["
        depth -= ch in "})]"
        if ch == "=" and depth == 0:
            cut = i
    return math[cut + 1 :] if cut >= 0 else math


def _last_line_math(text: str) -> str | None:
    stripped = text.rstrip()
    line_start = stripped.rfind("\n") + 1
    spans = list(_MATH.finditer(stripped))
    # a display block spanning lines counts when it closes on the last line
    if spans and spans[-1].end() > line_start:
        value = next(g for g in spans[-1].groups() if g is not None)
        return _equation_side(value)
    found = _PLAIN_END.search(stripped[line_start:])
    return found[1] if found is not None else None


def stated_answer(text: str) -> str | None:
    """The answer ``text`` states without a box (see the module docstring), or None."""
    tail = _EMPHASIS.sub("", text[-WINDOW:])
    answer = _last_statement(tail)
    if answer is None:
        answer = _last_line_math(tail)
    if answer is None:
        return None
    answer = answer.strip().rstrip(".").strip()
    if not answer or len(answer) > MAX_ANSWER:
        return None
    return answer
