"""Search-R1 style QA: exact match of the last ``<answer>...</answer>`` against any of the targets.

The answer is the content of the last ``<answer>(.*?)</answer>`` (across newlines), stripped. Both
sides are normalised as in SQuAD: lowercase, punctuation removed, the articles a/an/the removed,
whitespace collapsed. A correct answer scores ``score`` (divided by 4 when the response holds more
than 10 opening or closing answer tags: tag spamming), a wrong one ``format_score``, none 0.

``ground_truth`` may be search-R1's ``{"target": [...]}`` (a list, tuple or NumPy array, as parquet
gives it), a plain list of answers, or one string.

``compat="verl"`` reproduces ``verl.utils.reward_score.search_r1_like_qa_em`` exactly (same values on
every input verl accepts). The default mode differs only where verl fails: it accepts a bare string
or list as ground truth (verl needs the dict) and non-string targets (numbers are compared as their
text), and it never prints samples to stdout (verl prints one in 64 at random).
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable
from typing import Any, Literal

from judger.scorers.committed import committed_text

_OPEN, _CLOSE = "<answer>", "</answer>"
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
MAX_TAGS = 10


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lowercase, drop punctuation, drop articles, collapse whitespace."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION)).split())


def extract_solution(solution_str: str) -> str | None:
    """The stripped content of the last ``<answer>...</answer>``, or None.

    The same as the last match of ``re.finditer(r"<answer>(.*?)</answer>", s, re.DOTALL)`` (verl's
    extraction), found with a few C-level string searches instead: the regex retries its lazy scan
    from every ``<answer>`` without a closing tag after it, which is quadratic (a 256 kB response of
    opening tags took 96 s on the event loop).

    Why this is the last match: the two tags cannot overlap, so every closing tag either ends a
    match or lies outside all of them. Take ``o``, the last opening tag before the last closing
    tag, and ``c``, the last closing tag before ``o``: the scan is past ``c`` and looking for an
    opening tag; it takes the first one after ``c``, which runs to the first closing tag after
    ``o``; no opening tag after that one has a closing tag after it.
    """
    last_close = solution_str.rfind(_CLOSE)
    if last_close < 0:
        return None
    last_open = solution_str.rfind(_OPEN, 0, last_close)
    if last_open < 0:
        return None
    previous_close = solution_str.rfind(_CLOSE, 0, last_open)
    start = solution_str.find(_OPEN, previous_close + len(_CLOSE) if previous_close >= 0 else 0)
    end = solution_str.find(_CLOSE, start + len(_OPEN))
    return solution_str[start + len(_OPEN) : end].strip()


def targets_of(ground_truth: Any, *, strict_verl: bool = False) -> list[str]:
    """The list of acceptable answers in ``ground_truth``."""
    if strict_verl:
        # verl indexes ["target"] and iterates unless it is a str: reproduce its TypeError/KeyError too
        golden = ground_truth["target"]
        return [golden] if isinstance(golden, str) else list(golden)
    if isinstance(ground_truth, dict):
        if "target" not in ground_truth:
            raise KeyError(f"QA ground_truth dict needs a 'target' key, got keys {sorted(ground_truth)}")
        ground_truth = ground_truth["target"]
    if isinstance(ground_truth, (str, bytes)) or not isinstance(ground_truth, Iterable):
        ground_truth = [ground_truth]
    return [t.decode() if isinstance(t, bytes) else str(t) for t in ground_truth]


def compute_score(
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    *,
    compat: Literal["verl"] | None = None,
    format_score: float = 0.0,
    score: float = 1.0,
) -> dict[str, Any]:
    """Exact-match score of one response; ``{"score", "acc", "pred"}``."""
    if compat not in (None, "verl"):
        raise ValueError(f"compat must be 'verl' or None, got {compat!r}")
    if solution_str is None:
        solution_str = ""
    # the default mode reads the answer the model committed to, never one inside its reasoning
    answer = extract_solution(solution_str if compat == "verl" else committed_text(solution_str))
    if answer is None:
        return {"score": 0.0, "acc": False, "pred": None}
    targets = targets_of(ground_truth, strict_verl=compat == "verl")
    normalised = normalize_answer(answer)
    correct = any(normalize_answer(t) == normalised for t in targets)
    if not correct:
        return {"score": float(format_score), "acc": False, "pred": answer}
    spammed = solution_str.count("<answer>") > MAX_TAGS or solution_str.count("</answer>") > MAX_TAGS
    return {"score": float(score / 4 if spammed else score), "acc": True, "pred": answer}
