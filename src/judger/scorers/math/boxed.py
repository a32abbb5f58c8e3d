"""Finding the final ``\\boxed{...}`` answer in a response.

Two flavours: verl's (kept quirk for quirk, for ``compat="verl"``) and ours, which reads the same
answers plus the ones verl drops (``\\fbox{}``, ``\\boxed 5`` followed by text, a ``\\boxed{}`` after
a ``\\boxed 5``), and cleans a sentence-final period inside the box (``\\boxed{72.}``).
"""

from __future__ import annotations

import re

BOXED = "\\boxed"
FBOX = "\\fbox"


def _brace_match(text: str, start: int) -> int | None:
    """Index of the ``}`` that brings the brace depth counted from ``start`` back to zero, or None.

    Counting starts at ``start`` itself (not at the first ``{``), as verl does, so a ``}`` met before
    any ``{`` sends the depth negative and the box never closes.
    """
    depth = 0
    opening, closing = "{", "}"
    i = start
    n = len(text)
    while i < n:
        # jump between braces: a 10 MB response costs one pass of str.find, not a Python loop per char
        next_open = text.find(opening, i)
        next_close = text.find(closing, i)
        if next_close < 0:
            return None
        if 0 <= next_open < next_close:
            depth += 1
            i = next_open + 1
            continue
        depth -= 1
        if depth == 0:
            return next_close
        i = next_close + 1
    return None


def last_boxed_only_string_verl(text: str) -> str | None:
    """verl ``math_reward``'s extraction: the last ``\\boxed{...}`` (or ``\\fbox{...}``) with its wrapper.

    If ``"\\boxed "`` (with a space) occurs anywhere, verl returns the text after its last
    occurrence up to the next ``$`` instead, whatever else follows.
    """
    if BOXED + " " in text:
        return BOXED + " " + text.split(BOXED + " ")[-1].split("$")[0]
    idx = text.rfind(BOXED)
    if idx < 0:
        idx = text.rfind(FBOX)
        if idx < 0:
            return None
    end = _brace_match(text, idx)
    return None if end is None else text[idx : end + 1]


def remove_boxed_verl(boxed: str) -> str:
    """verl's ``remove_boxed``: the inside of ``\\boxed{...}`` / after ``\\boxed ``; AssertionError otherwise.

    An ``\\fbox{...}`` therefore raises, which verl's scorer turns into a score of 0.
    """
    if BOXED + " " in boxed:
        if not boxed.startswith(BOXED + " "):
            raise AssertionError(f"box error: {boxed[:100]!r}")
        return boxed[len(BOXED) + 1 :]
    if not (boxed.startswith(BOXED + "{") and boxed.endswith("}")):
        raise AssertionError(f"box error: {boxed[:100]!r}")
    return boxed[len(BOXED) + 1 : -1]


def last_boxed_strict_verl(text: str) -> str | None:
    """The last ``\\boxed{...}`` (brace matched) with its wrapper, ``\\boxed{`` only (verl's math_dapo)."""
    idx = text.rfind(BOXED + "{")
    if idx < 0:
        return None
    end = _brace_match(text, idx)
    return None if end is None else text[idx : end + 1]


def clean_answer(answer: str) -> str:
    """Strip spaces, a sentence-final period (``72.``) and a ``$...$`` wrapper from an answer."""
    answer = answer.strip()
    # "\boxed{72.}" ends a sentence inside the box; "\boxed{$5$}" wraps math mode again
    while answer.endswith((".", "\\.")) and not answer.endswith("..."):
        answer = answer[:-2] if answer.endswith("\\.") else answer[:-1]
        answer = answer.rstrip()
    if len(answer) >= 2 and answer.startswith("$") and answer.endswith("$"):
        answer = answer.strip("$").strip()
    return answer


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` / ``\\fbox{...}`` / ``\\boxed x``, cleaned; None if none.

    The last one wins by position, whichever form it takes. An unclosed box gives None.
    """
    candidates = [(text.rfind(BOXED), BOXED), (text.rfind(FBOX), FBOX)]
    idx, macro = max(candidates)
    if idx < 0:
        return None
    rest = idx + len(macro)
    # "\boxed {5}" and "\boxed{5}" are the same command; "\boxed 5" takes the next token up to "$"
    j = rest
    while j < len(text) and text[j] in " \t\n":
        j += 1
    if j < len(text) and text[j] == "{":
        end = _brace_match(text, j)
        if end is None:
            return None
        return clean_answer(text[j + 1 : end])
    if j > rest:
        inner = text[j:].split("$")[0]
        inner = inner.split("\n")[0]
        return clean_answer(inner) or None
    return None


_JOINER = re.compile(
    r"(?:\s|\$|,|;|&|\\\\|\\[()\[\]]|\\q?quad|\\[,;: ]|and|or"
    r"|\\text\s*\{[^{}]{0,40}\}|\\textbf\s*\{[^{}]{0,40}\}|[A-Za-z](?:_\{?\w{1,3}\}?)?\s*=)*"
)


def final_boxes(text: str) -> list[str]:
    """The boxes that end the response together: ``\\boxed{1}, \\boxed{2} and \\boxed{3}`` -> three.

    Only boxes joined by punctuation, spacing, math delimiters, short words (``and``, a
    ``\\text{}``) and the name of the next unknown (``y_2 =``) count; one box, or a run broken
    by other text, gives one item (the last box).
    """
    found: list[tuple[int, int]] = []
    pos = 0
    while True:
        start = text.find(BOXED + "{", pos)
        if start < 0:
            break
        end = _brace_match(text, start + len(BOXED))
        if end is None:
            break
        found.append((start, end))
        pos = end + 1
    run: list[str] = []
    for k in range(len(found) - 1, -1, -1):
        start, end = found[k]
        if run:
            between = text[end + 1 : found[k + 1][0]]
            if len(between) > 200 or not _JOINER.fullmatch(between):
                break
        run.append(clean_answer(text[start + len(BOXED) + 1 : end]))
    return list(reversed(run))


def run_answer(text: str) -> str | None:
    """The last box's content, or where a run of boxes ends ``text`` with two different answers
    (``\\boxed{73} or \\boxed{72}``), their list: two guesses are graded as both, never as the last."""
    if text.count(BOXED) >= 2:
        run = final_boxes(text)
        if len(set(run)) >= 2:
            return ", ".join(run)
    return last_boxed(text)


_STATED_FINAL = re.compile(r"final answer is\s*\$([^$\n]{1,200})\$", re.IGNORECASE)
STATED_FINAL_WINDOW = 2000
"""How far from the end a stated final answer is looked for."""


def final_answer(text: str) -> str | None:
    """The last box's content, unless the response states its final answer after it.

    Minerva's format (``Final Answer: The final answer is $X$. I hope it is correct.``) after the
    last box means the boxes were intermediate results: X is the answer. With no box at all the
    answer is None, as before (the format requirement stays).
    """
    answer = last_boxed(text)
    if answer is None:
        return None
    start = max(text.rfind(BOXED), text.rfind(FBOX), len(text) - STATED_FINAL_WINDOW)
    if text.find("answer is", start) < 0:
        return answer
    stated = [found[1] for found in _STATED_FINAL.finditer(text, start)]
    return (clean_answer(stated[-1]) or answer) if stated else answer
