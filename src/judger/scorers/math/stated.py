"""A final answer stated without a box: ``The answer is $\\frac{1}{2}$.``, ``Final answer: 7/5``.

Read only where the committed text has no ``\\boxed{}`` (a box always wins), and only what the
response commits to as its answer, in this order:

1. the last statement ``answer is X`` / ``answer: X`` / ``answer = X`` (``final answer``, ``the
   answer``), and nothing that could be another answer (math, a digit) follows it to the end of
   the response (``The answer is 5. Or maybe 6.`` states no answer here). X is one math span
   (``$...$``, ``\\(...\\)``, ``\\[...\\]``; of an equation the side after its last ``=``), or the
   rest of its sentence when that is a short answer (``10 apples``, ``7/5``); a longer sentence
   gives what it closes on (``Final Answer: The largest $n$ is 34.``) or its one number (``Jane
   started 3 hours ago.``), else nothing;
2. else the last value of the last non-empty line: the math span or the number that ends last
   (``so $\\binom{5}{2} = 10$``, ``... is 2/3.``, ``$1,000.99``).

Anything else is no answer. Inline math (``$...$``, ``\\(...\\)``) does not span lines, display
math (``$$...$$``, ``\\[...\\]``) may, as in LaTeX and Markdown. Trailing chat-template tokens
(``<|im_start|>user``, ``</s>``) and Minerva's closing ``I hope it is correct.`` are dropped first.
The grading that follows is the box's, so a stated hedge (``the answer is 72 or 73``) is a list,
equal to no single value, and only one value is ever read: a response that writes many numbers is
graded on its last.
"""

from __future__ import annotations

import re

WINDOW = 2000
"""How far from the end a stated answer is looked for."""
MAX_ANSWER = 300
MAX_WORDS = 3
"""Words a statement's value may hold outside math (``10 apples``, ``x = 3 or so``)."""

_STATEMENT = re.compile(r"\banswer\b\s*(?:\bis\b\s*:?|:|=)\s*", re.IGNORECASE)
_MATH = re.compile(
    r"\$\$(.{1,300}?)\$\$|\\\[(.{1,300}?)\\\]"  # display math: may span lines
    r"|\$((?:[^$\n\\]|\\[^\n]){1,300}?)\$|\\\(([^\n]{1,300}?)\\\)",  # inline: one line, \$ escaped
    re.S,
)
_NUMBER = r"-?\d[\d,]*(?:\.\d+)?(?:\s*/\s*\d+)?(?:\s*[%€£¥$])?(?:[A-Za-z²³]{1,3}\b)?"
_NUMBER_TOKEN = re.compile(rf"(?<![\w.\\]){_NUMBER}")
_CLOSING = re.compile(rf"(?:=|\bis|\bare|\bequals|'s)\s+({_NUMBER}|\$[^$]{{1,200}}\$)\s*\.?\s*$")
_SENTENCE = re.compile(r"[^\n]{1,300}?(?=\.\s|\.$|;|\n|$)")
_ANSWERISH = re.compile(r"[0-9$\\]")
_WORD = re.compile(r"[A-Za-z]{2,}")
_COMMAND = re.compile(r"\\[A-Za-z]+")
_TRAILER = re.compile(r"(?:\s|<\|[^|>\s]{1,30}\|>\w{0,12}|</s>|<eos>|I hope it is correct\.?)+$")
_EMPHASIS = re.compile(r"\*\*|__")
_DELIMITER = re.compile(r"\$|\\[(\[]")


def _span_value(found: re.Match[str]) -> str:
    return _equation_side(next(g for g in found.groups() if g is not None))


def _sentence_value(sentence: str) -> str | None:
    """The answer a statement's sentence gives: the sentence itself when it is a short answer, what
    a longer one closes on, or its one number; None for prose that names no one value."""
    closing = _CLOSING.search(sentence)
    if closing is not None:  # "The largest $n$ is 34"
        return closing[1].strip("$")
    if not _DELIMITER.search(sentence) and len(_WORD.findall(_COMMAND.sub("", sentence))) <= MAX_WORDS:
        return sentence
    # a sentence is no formula: a LaTeX parser reads "Jane started 3 hours ago" as a product of 20
    # symbols, for seconds; its one number is what it states
    numbers = _NUMBER_TOKEN.findall(_MATH.sub(" ", sentence))
    return numbers[0] if len(numbers) == 1 and not _DELIMITER.search(sentence) else None


def _statement_value(text: str, start: int) -> tuple[str | None, int] | None:
    """The value after a statement that ends at ``start``, and where that value ends."""
    found = _MATH.match(text, start)
    if found is not None:
        return _span_value(found), found.end()
    found = _SENTENCE.match(text, start)
    if found is None:
        return None
    return _sentence_value(found[0]), found.end()


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
    """The side after the last ``=`` outside braces (``\\binom{5}{2} = 10`` -> ``10``); a relation
    (``x <= 2``, ``x != 5``) is kept whole."""
    depth = 0
    cut = -1
    for i, ch in enumerate(math):
        depth += ch in "{(["
        depth -= ch in "})]"
        if ch == "=" and depth == 0 and (i == 0 or math[i - 1] not in "<>!"):
            cut = i
    return math[cut + 1 :] if cut >= 0 else math


def _last_line_value(text: str) -> str | None:
    """The math span or number that ends last on ``text``'s last line (a display block spanning
    lines counts when it closes there)."""
    line_start = text.rfind("\n") + 1
    last: tuple[int, str] | None = None
    spans = list(_MATH.finditer(text))
    if spans and spans[-1].end() > line_start:
        last = (spans[-1].end(), _span_value(spans[-1]))
    # numbers outside math, with each span blanked out (its digits are the span's)
    line = text[line_start:]
    for span in spans:
        lo, hi = max(span.start() - line_start, 0), span.end() - line_start
        if hi > 0:
            line = line[:lo] + " " * (hi - lo) + line[hi:]
    for found in _NUMBER_TOKEN.finditer(line):
        if last is None or line_start + found.end() > last[0]:
            last = (line_start + found.end(), found[0])
    return None if last is None else last[1]


def stated_answer(text: str) -> str | None:
    """The answer ``text`` states without a box (see the module docstring), or None."""
    tail = _TRAILER.sub("", _EMPHASIS.sub("", text[-WINDOW:]))
    answer = _last_statement(tail)
    if answer is None:
        answer = _last_line_value(tail)
    if answer is None:
        return None
    answer = answer.strip().rstrip(".").strip()
    if not answer or len(answer) > MAX_ANSWER:
        return None
    return answer
