"""DAPO math: the Minerva ``Answer: ...`` line, +1 / -1, optional overlong-buffer penalty.

The answer is the last match of ``(?i)Answer\\s*:\\s*([^\\n]+)`` in the last 300 characters
(``"[INVALID]"`` when none), both sides go through :func:`normalize_final_answer`, and the score
is 1.0 when they are equal, else -1.0. Without an ``Answer:`` line, the last ``\\boxed{}`` of the
last 100 characters is compared verbatim with the label instead (verl 0.9's fallback;
``boxed_fallback=False`` gives older verl and XTuner, which score such a response -1 with
``pred="[INVALID]"``).

- ``compat="verl"``: verl's ``math_dapo.compute_score`` exactly (string equality after
  normalisation; ``strict_box_verify`` uses only the verbatim ``\\boxed{}`` comparison).
- default: the same extraction, window and format requirement, but two normalised answers that
  differ as strings are then compared with Math-Verify's equivalence, fixing verl's false
  negatives such as ``Answer: 5.0`` vs ``5``, ``Answer: 0.5`` vs ``\\frac{1}{2}`` or
  ``Answer: 1/2`` vs ``\\frac12``. That comparison can be slow on hostile input: run it on the
  process pool.

Both modes strip one trailing ``eos_token`` first and, given ``max_response_len``,
``overlong_buffer_len`` and ``response_length`` (the number of response tokens), add verl's DAPO
overlong penalty ``min(-(L - (max_response_len - overlong_buffer_len)) / overlong_buffer_len *
overlong_penalty_factor, 0)`` to the score, reported as ``overlong_reward`` / ``overlong``.
Returns ``{"score", "acc", "pred"}`` (+ the overlong keys).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from judger.scorers.committed import committed_text
from judger.scorers.math.boxed import last_boxed_strict_verl, remove_boxed_verl, run_answer
from judger.scorers.math.reward import grade_answer
from judger.scorers.math.rounding import Rounding

Compat = Literal["verl"] | None

CLIP_CHARS = 300
STRICT_BOX_CHARS = 100
INVALID = "[INVALID]"
ANSWER_PATTERN = re.compile(r"(?i)Answer\s*:\s*([^\n]+)")

# Minerva's normalisation (Lewkowycz et al. 2022, appendix), in verl's order.
_SUBSTITUTIONS = (
    ("an ", ""),
    ("a ", ""),
    (".$", "$"),
    ("\\$", ""),
    ("\\ ", ""),
    (" ", ""),
    ("mbox", "text"),
    (",\\text{and}", ","),
    ("\\text{and}", ","),
    ("\\text{m}", "\\text{}"),
)
_REMOVED = (
    "square",
    "ways",
    "integers",
    "dollars",
    "mph",
    "inches",
    "hours",
    "km",
    "units",
    "\\ldots",
    "sue",
    "points",
    "feet",
    "minutes",
    "digits",
    "cents",
    "degrees",
    "cm",
    "gm",
    "pounds",
    "meters",
    "meals",
    "edges",
    "students",
    "childrentickets",
    "multiples",
    "\\text{s}",
    "\\text{.}",
    "\\text{\ns}",
    "\\text{}^2",
    "\\text{}^3",
    "\\text{\n}",
    "\\text{}",
    "\\mathrm{th}",
    "^\\circ",
    "^{\\circ}",
    "\\;",
    ",\\!",
    "{,}",
    '"',
    "\\dots",
)
_FIRST_MATH = re.compile(r"(.*?)(\$)(.*?)(\$)(.*)")
_UNWRAP = tuple(
    re.compile(pattern)
    for pattern in (
        r"(\\text\{)(.*?)(\})",
        r"(\\textbf\{)(.*?)(\})",
        r"(\\overline\{)(.*?)(\})",
        r"(\\boxed\{)(.*)(\})",
    )
)
_SHORT_FRAC = re.compile(r"(frac)([^{])(.)")
_SHORT_SQRT = re.compile(r"(sqrt)([^{])")


def normalize_final_answer(answer: str) -> str:
    """Minerva / verl normalisation of a final answer (the text after the last ``=``, units dropped ...)."""
    answer = answer.split("=")[-1]
    for before, after in _SUBSTITUTIONS:
        answer = answer.replace(before, after)
    for word in _REMOVED:
        answer = answer.replace(word, "")
    answer = _FIRST_MATH.sub("$\\3$", answer)
    for pattern in _UNWRAP:
        answer = pattern.sub("\\2", answer)
    answer = _SHORT_FRAC.sub("frac{\\2}{\\3}", answer)
    answer = _SHORT_SQRT.sub("sqrt{\\2}", answer)
    answer = answer.replace("$", "")
    if answer.replace(",", "").isdigit():
        answer = answer.replace(",", "")
    return answer.strip()


def extract_answer(text: str) -> str:
    """The last ``Answer: ...`` line's content, or ``"[INVALID]"``."""
    found = ANSWER_PATTERN.findall(text)
    return found[-1] if found else INVALID


def _strict_box(text: str, ground_truth: Any) -> tuple[bool, str | None]:
    """The last ``\\boxed{}`` of the last 100 characters, compared verbatim (no normalisation)."""
    boxed = last_boxed_strict_verl(text[-STRICT_BOX_CHARS:])
    pred = remove_boxed_verl(boxed) if boxed is not None else None
    return pred == ground_truth, pred


_MATH_SPAN = re.compile(r"\$([^$]+)\$")


def _stated(line: str) -> tuple[str, str]:
    """An ``Answer:`` line's answer as graded, and as ``pred``: its math where it holds one span
    (``$\\frac12$``), the list of its spans where it holds several (``$72$ or $73$``: two guesses,
    where Minerva's normalisation keeps the first), else the line."""
    if "\\boxed" in line:
        boxed = run_answer(line)
        if boxed is not None:
            return boxed, boxed
    spans = [s.strip() for s in _MATH_SPAN.findall(line)]
    if len(set(spans)) >= 2:
        listed = ", ".join(spans)
        return listed, listed
    return (spans[0] if spans else line.strip()), normalize_final_answer(line)


def _answer_and_pred(text: str, strict_box: bool, boxed_fallback: bool) -> tuple[str | None, str | None]:
    """The answer the default mode grades in ``text`` (the ``Answer:`` line's, or the box of the
    last 100 characters) and the ``pred`` it reports; no answer: None and verl's ``pred``."""
    line = INVALID if strict_box else extract_answer(text)
    if line != INVALID:
        return _stated(line)
    if strict_box or boxed_fallback:
        tail = text[-STRICT_BOX_CHARS:]
        boxed = run_answer(tail) if "\\boxed{" in tail else None
        if boxed is not None:
            return boxed, boxed
        return None, None if strict_box else INVALID
    return None, INVALID


def committed_answer(response: str, strict_box: bool = False, boxed_fallback: bool = True) -> str | None:
    """The answer the default mode grades in ``response`` (its committed text's last 300 characters)."""
    return _answer_and_pred(committed_text(response)[-CLIP_CHARS:], strict_box, boxed_fallback)[0]


def _default_verdict(
    text: str, gold: Any, strict_box: bool, boxed_fallback: bool, ordered: bool, rounding: Rounding
) -> tuple[bool, str | None]:
    """The default mode's verdict and ``pred``: the same answer verl reads, graded by equivalence
    (:func:`~judger.scorers.math.reward.grade_answer`) as written, not after Minerva's normalisation,
    which pays what it drops (``5 km`` and ``5 cm`` both become ``5``; ``50, 625`` becomes
    ``50625``); a run of two different boxes is their list (two guesses)."""
    answer, pred = _answer_and_pred(text, strict_box, boxed_fallback)
    if not answer:
        return False, pred
    label = str(gold)
    return answer == label or grade_answer(answer, label, ordered, rounding), pred


def overlong_penalty(
    response_length: int, max_response_len: int, overlong_buffer_len: int, factor: float
) -> float:
    """verl's DAPO penalty: 0 up to ``max_response_len - overlong_buffer_len`` tokens, then linear."""
    expected = max_response_len - overlong_buffer_len
    exceed = response_length - expected
    return min(-exceed / overlong_buffer_len * factor, 0.0)


def compute_score(
    solution_str: Any,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    *,
    compat: Compat = None,
    strict_box_verify: bool = False,
    boxed_fallback: bool = True,
    eos_token: str | None = None,
    response_length: int | None = None,
    max_response_len: int | None = None,
    overlong_buffer_len: int | None = None,
    overlong_penalty_factor: float = 1.0,
    ordered: bool = False,
    rounding: Rounding = None,
    restates_question: bool = False,
) -> dict[str, Any]:
    """Score one response (see the module docstring). ``ordered``, ``rounding``,
    ``restates_question``: what the prompt asks for and whether the answer restates it (the judger
    reads them: :mod:`~judger.scorers.math.prompt_facts`), default mode only."""
    if compat not in (None, "verl"):
        raise ValueError(f"compat must be 'verl' or None, got {compat!r}")
    if not isinstance(solution_str, str):
        raise TypeError(f"dapo scorer: the response must be a string, got {type(solution_str).__name__}")
    if eos_token and solution_str.endswith(eos_token):
        solution_str = solution_str[: -len(eos_token)]
    fixed = compat is None
    if fixed:
        solution_str = committed_text(solution_str)
    text = solution_str[-CLIP_CHARS:]
    pred: str | None
    if fixed:
        acc, pred = _default_verdict(text, ground_truth, strict_box_verify, boxed_fallback, ordered, rounding)
        acc = acc and not restates_question
    elif strict_box_verify:
        acc, pred = _strict_box(text, ground_truth)
    else:
        pred = normalize_final_answer(extract_answer(text))
        gold = normalize_final_answer(ground_truth)
        acc = pred == gold
        if pred == INVALID and boxed_fallback:
            box_acc, box_pred = _strict_box(text, ground_truth)
            if box_pred is not None:
                acc, pred = box_acc, box_pred
    score = 1.0 if acc else -1.0
    result: dict[str, Any] = {"score": score, "acc": acc, "pred": pred}
    if max_response_len is not None and overlong_buffer_len is not None and response_length is not None:
        penalty = overlong_penalty(
            response_length, max_response_len, overlong_buffer_len, overlong_penalty_factor
        )
        result["score"] = score + penalty
        result["overlong_reward"] = penalty
        result["overlong"] = penalty < 0
    return result
