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

_NOISE = re.compile(r"\\left|\\right|\\displaystyle|\\[,;:! ]|~|\s|\$")
_FRACTIONS = re.compile(r"\\[dt](frac|binom)")
_MATH = re.compile(r"\$\$(.+?)\$\$|\$([^$]+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.S)
_COMPOUND = re.compile(r"[\\^/*+()=\-]|\d[A-Za-z]|[A-Za-z]\d")
_PLAIN_NUMBER = re.compile(r"-?[\d.,]+")
MIN_CHARS = 3


def canonical(text: str) -> str:
    """``text`` without spacing, math delimiters and ``\\left``/``\\right``, ``\\dfrac`` as ``\\frac``."""
    return _FRACTIONS.sub(r"\\\1", _NOISE.sub("", text))


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
