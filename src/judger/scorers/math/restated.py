"""An answer copied from the question is no answer: ``\\boxed{\\frac{8}{22}}`` for "Simplify
$\\frac{8}{22}$", ``\\boxed{\\binom{8}{4}}`` for "Compute $\\dbinom{8}{4}$".

An equivalence grader evaluates both sides, so the question's own expression equals the label by
value for every "compute", "simplify" and "evaluate" problem: a policy that restates the question
would be paid without solving anything. An answer is a restatement when it is an expression (it
holds an operator or a LaTeX command, not a plain number) whose canonical text stands in the
question's, token for token, and it is not the label's own text (where the label is an
expression the question shows, as in a choice between two, writing it is the answer).
"""

from __future__ import annotations

import re
from functools import lru_cache

_NOISE = re.compile(r"\\left|\\right|\\displaystyle|\\[,;:! ]|~|\s|\$")
_FRACTIONS = re.compile(r"\\[dt](frac|binom)")
_MATH = re.compile(r"\$\$(.+?)\$\$|\$([^$]+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.S)
_COMPOUND = re.compile(r"[\\^/*+()=\-]|\d[A-Za-z]|[A-Za-z]\d")
_PLAIN_NUMBER = re.compile(r"-?[\d.,]+")
MIN_CHARS = 3
COPY_WORDS = 6
"""A line this long or longer can be a copy of the question's (a shorter one is an answer)."""
COPY_SHARE = 0.6
"""Share of a line's word trigrams found in the question that make the line a copy of it."""
_WORDS = re.compile(r"[\w$\\{}^]+")


def canonical(text: str) -> str:
    """``text`` without spacing, math delimiters and ``\\left``/``\\right``, ``\\dfrac`` as ``\\frac``."""
    return _FRACTIONS.sub(r"\\\1", _NOISE.sub("", text))


@lru_cache(maxsize=1024)
def _question_text(question: str) -> str:
    """The question with each math span canonical and set apart by spaces; its prose as written."""
    return _MATH.sub(lambda m: " " + canonical(next(g for g in m.groups() if g is not None)) + " ", question)


def _standalone(haystack: str, needle: str) -> bool:
    """Whether ``needle`` occurs in ``haystack`` as whole tokens (``2+3`` is not in ``12+3``)."""
    start = haystack.find(needle)
    while start >= 0:
        end = start + len(needle)
        before = haystack[start - 1] if start else ""
        after = haystack[end] if end < len(haystack) else ""
        if not (before.isalnum() or before == "\\") and not (after.isalnum() and needle[-1].isalnum()):
            return True
        start = haystack.find(needle, start + 1)
    return False


@lru_cache(maxsize=1024)
def _trigrams(text: str) -> frozenset[tuple[str, ...]]:
    words = _WORDS.findall(text.lower())
    # a GRPO group repeats its question: each distinct text is read once
    return frozenset(tuple(words[i : i + 3]) for i in range(len(words) - 2))


def copies_question(text: str, question: str) -> bool:
    """Whether the last line of ``text`` (a response without a box, whose answer is read from it)
    is copied from ``question``: most of its word trigrams are the question's. A response that
    restates the question would otherwise be paid whenever the question's last number is the
    answer ("... numbers from 1 to 20 ... how many rolls?" for 20)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or len(_WORDS.findall(lines[-1])) < COPY_WORDS:
        return False
    line = _trigrams(lines[-1])
    return bool(line) and len(line & _trigrams(question)) >= COPY_SHARE * len(line)


def restates_question(answer: str, question: str, gold: str) -> bool:
    """True when ``answer`` is an expression copied from ``question`` that is not ``gold``'s text."""
    a = canonical(answer)
    if len(a) < MIN_CHARS or _PLAIN_NUMBER.fullmatch(a) or not _COMPOUND.search(a):
        return False
    if a == canonical(gold):
        return False
    # math spans token for token; prose (GSM8K-style "Compute 1/31 / (1/93)") as written
    return _standalone(_question_text(question), a) or _standalone(
        " ".join(question.split()), " ".join(answer.split())
    )
