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


def _strict_box(text: str, ground_truth: Any, fixed: bool = False) -> tuple[bool, str | None]:
    """The last ``\\boxed{}`` of the last 100 characters, compared verbatim (no normalisation).

    ``fixed`` (the default mode): a run of boxes there with two different answers is their list
    (:func:`~judger.scorers.math.boxed.run_answer`), as verl's last box would pay two guesses."""
    tail = text[-STRICT_BOX_CHARS:]
    if fixed and "\\boxed{" in tail:
        pred = run_answer(tail)
    else:
        boxed = last_boxed_strict_verl(tail)
        pred = remove_boxed_verl(boxed) if boxed is not None else None
    return pred == ground_truth, pred


def _equivalent(pred: str, gold: str) -> bool:
    if not pred or not gold or pred == INVALID:
        return False

    return grade_answer(pred, gold)


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
) -> dict[str, Any]:
    """Score one response (see the module docstring)."""
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
    if strict_box_verify:
        acc, pred = _strict_box(text, ground_truth, fixed)
        if not acc and fixed and pred is not None:
            acc = _equivalent(normalize_final_answer(pred), normalize_final_answer(ground_truth))
    else:
        pred = normalize_final_answer(extract_answer(text))
        gold = normalize_final_answer(ground_truth)
        acc = pred == gold
        if pred == INVALID and boxed_fallback:
            box_acc, box_pred = _strict_box(text, ground_truth, fixed)
            if box_pred is not None:
                acc, pred = box_acc, box_pred
                if fixed and not acc:
                    acc = _equivalent(normalize_final_answer(box_pred), gold)
        elif fixed and not acc:
            acc = _equivalent(pred, gold)
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
