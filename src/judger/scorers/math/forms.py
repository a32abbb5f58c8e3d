"""Answer forms that name one value in several ways, decided without a LaTeX parser.

Each check returns True (same answer), False (the forms say they differ) or None (not this form:
the caller goes on). They run before Math-Verify, which reads ``9:05`` as a number, ``B. 12`` as
12, ``2 3/4`` as 6/4 and a nested list as a set.
"""

from __future__ import annotations

import re
from fractions import Fraction

from judger.scorers.math.boxed import BOXED, FBOX, last_boxed

_TEXT = re.compile(r"\\(?:text|textrm|textnormal|mathrm|mbox)\s*\{([^{}]*)\}")
_SPACING = re.compile(r"\\[,;:! ]|~")

_NOISE_TAIL = re.compile(r"(?:\\+|[;,:]|\\quad|\\qquad|\s)+$")


def strip_noise(answer: str) -> str:
    """``answer`` without a trailing backslash, ``;``, ``,`` or ``:`` (what a clipped box leaves)."""
    stripped = _NOISE_TAIL.sub("", answer)
    return stripped or answer


_WORD = re.compile(r"[A-Za-z]{2,}")


def gold_answers(ground_truth: str) -> str:
    """A label whose answer is several boxes as one list: ``\\boxed{1} and \\boxed{2}`` -> ``1, 2``.

    Boxes count together when at most three words and sixty characters stand between them
    (``\\boxed{1} papers and \\boxed{2} bins``); a box after a longer text starts over.
    """
    if ground_truth.count(BOXED) + ground_truth.count(FBOX) < 2:
        return ground_truth
    spans: list[tuple[int, int]] = []
    pos = 0
    while True:
        starts = [i for i in (ground_truth.find(BOXED, pos), ground_truth.find(FBOX, pos)) if i >= 0]
        if not starts:
            break
        start = min(starts)
        end = _box_end(ground_truth, start)
        if end < 0:
            break
        spans.append((start, end))
        pos = end + 1
    parts: list[str] = []
    for k in range(len(spans) - 1, -1, -1):
        start, end = spans[k]
        if parts:
            between = _TEXT.sub(r"\1", ground_truth[end + 1 : spans[k + 1][0]])
            if len(between) > 60 or len(_WORD.findall(between)) > 3:
                break
        parts.append(last_boxed(ground_truth[: end + 1]) or "")
    return ", ".join(reversed(parts)) if len(parts) >= 2 else ground_truth


def _box_end(text: str, start: int) -> int:
    """Index of the ``}`` closing the box that starts at ``start``; -1 when it does not close."""
    brace = text.find("{", start)
    depth = 0
    for i in range(brace, len(text)) if brace >= 0 else ():
        depth += text[i] == "{"
        depth -= text[i] == "}"
        if depth == 0:
            return i
    return -1


def _plain(text: str) -> str:
    previous = None
    while previous != text:
        previous = text
        text = _TEXT.sub(r"\1", text)
    return _SPACING.sub(" ", text).replace("\\left", "").replace("\\right", "").replace("$", "").strip()


# --- option letters --------------------------------------------------------------------------------

_HEDGE = re.compile(r"\b(?:or|and)\b|\(\s*[A-E]\s*\)|(?:^|\s)[A-E](?:[.:)]|\s|$)")
_OPTION = re.compile(r"^\(?\s*([A-E])\s*\)?(?:\s*[.:)]\s*(.*)|\s+(.*)|)$", re.S)


def option_equal(answer: str, gold: str) -> bool | None:
    """``B`` / ``(B)`` / ``B. 12`` against the same: the letters decide; None when a side is no option."""
    a, g = _OPTION.match(_plain(answer)), _OPTION.match(_plain(gold))
    if a is None or g is None:
        return None
    a_text, g_text = (a[2] or a[3] or "").strip(), (g[2] or g[3] or "").strip()
    if _HEDGE.search(a_text):
        return None  # "(A) or (B)" names two options: not one letter's answer

    if not a_text and not g_text and (len(_plain(answer)) > 3 or len(_plain(gold)) > 3):
        return None
    if a[1] != g[1]:
        return False
    if a_text and g_text:
        return "".join(a_text.split()) == "".join(g_text.split()) or None
    return True


# --- clock times --------------------------------------------------------------------------------------

_CLOCK = re.compile(
    r"^(\d{1,2}):(\d{2})(?::(\d{2}))?\s*(?:(a\.?\s*m\.?|p\.?\s*m\.?|am|pm)\s*)?$", re.IGNORECASE
)


def _clock(text: str) -> tuple[int, int | None] | None:
    """Seconds after the hour's start and the half day (0 a.m., 1 p.m., None unsaid)."""
    found = _CLOCK.match(_plain(text).replace("\\text", ""))
    if found is None:
        return None
    hour, minute, second = int(found[1]), int(found[2]), int(found[3] or 0)
    if hour > 23 or minute > 59 or second > 59:
        return None
    half = None
    if found[4]:
        if hour > 12 or hour == 0:
            return None
        half = 1 if found[4].lower().startswith("p") else 0
        hour %= 12
    elif hour >= 12:
        half, hour = (1, hour - 12) if hour < 24 else (None, hour)
    return hour * 3600 + minute * 60 + second, half


def clock_equal(answer: str, gold: str) -> bool | None:
    """``9:05`` = ``9:05:00``; ``21:05`` = ``9:05 p.m.`` ≠ ``9:05 a.m.``; no a.m./p.m. matches either."""
    a, g = _clock(answer), _clock(gold)
    if a is None or g is None:
        return None
    if a[0] != g[0]:
        return False
    return a[1] is None or g[1] is None or a[1] == g[1]


# --- mixed numbers --------------------------------------------------------------------------------

_MIXED = re.compile(r"^(-?)(\d+)\s+(\d+)\s*/\s*(\d+)$|^(-?)(\d+)\s*\\[dt]?frac\s*\{(\d+)\}\s*\{(\d+)\}$")


def mixed_number(text: str) -> Fraction | None:
    """``2 3/4`` or ``2\\frac{3}{4}`` (a proper fraction after a whole number) as 11/4, else None."""
    if len(text) > 200:
        return None  # no int conversion beyond Python's digit limit
    found = _MIXED.match(_plain(text))
    if found is None:
        return None
    sign, whole, num, den = (found[1], found[2], found[3], found[4]) if found[2] else found.group(5, 6, 7, 8)
    if int(den) == 0 or int(num) >= int(den):
        return None
    value = int(whole) + Fraction(int(num), int(den))
    return -value if sign else value


# --- named functions ---------------------------------------------------------------------------------

_FUNCTION_LHS = re.compile(r"^\s*[A-Za-z](?:_\{?\w+\}?)?\s*\(\s*[A-Za-z]\s*\)\s*=(?!=)")
_NAME_LHS = re.compile(r"^\s*[A-Za-z]\s*=(?!=)")


def function_bodies(answer: str, gold: str) -> tuple[str, str] | None:
    """``g(t)=t^2`` vs ``y=t^2``: both right-hand sides, when one side names a function of a variable."""
    a_fn, g_fn = _FUNCTION_LHS.match(answer), _FUNCTION_LHS.match(gold)
    if a_fn is None and g_fn is None:
        return None
    a_lhs = a_fn or _NAME_LHS.match(answer)
    g_lhs = g_fn or _NAME_LHS.match(gold)
    if a_lhs is None or g_lhs is None or "=" in answer[a_lhs.end() :] or "=" in gold[g_lhs.end() :]:
        return None
    return answer[a_lhs.end() :].strip(), gold[g_lhs.end() :].strip()


# --- matrices -----------------------------------------------------------------------------------------

# one environment: its body holds no other \begin or \end ("A + B" of two matrices is no matrix)
_MATRIX_ENV = re.compile(
    r"\\begin\{([pbBvV]?matrix|array)\}(?:\{[^{}]*\})?((?:(?!\\begin|\\end).)*)\\end\{\1\}", re.S
)
_NESTED = re.compile(r"^\s*[\[(]\s*[\[(].*[\])]\s*[\])]\s*$", re.S)


def matrix_cells(text: str) -> list[list[str]] | None:
    """The cells of a matrix written as ``pmatrix``/``bmatrix``/``matrix``/``array`` or ``[[a,b],[c,d]]``."""
    text = text.strip()
    found = _MATRIX_ENV.fullmatch(text.strip("()"))
    if found is not None:
        rows = [r for r in re.split(r"\\\\", found[2]) if r.strip()]
        return [[c.strip() for c in r.split("&")] for r in rows]
    if _NESTED.match(text):
        inner = text.strip()[1:-1]
        rows = re.findall(r"[\[(]([^\[\]()]*)[\])]", inner)
        if rows and re.sub(r"[\[(][^\[\]()]*[\])]|[\s,]", "", inner) == "":
            return [[c.strip() for c in r.split(",")] for r in rows]
    return None


def as_pmatrix(cells: list[list[str]]) -> str:
    return "\\begin{pmatrix}" + "\\\\".join("&".join(r) for r in cells) + "\\end{pmatrix}"
