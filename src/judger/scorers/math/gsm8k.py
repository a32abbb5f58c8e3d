"""GSM8K: the final answer after ``####`` (strict) or the last number (flexible), against a number.

Two modes, chosen by ``compat``:

- ``compat="verl"`` reproduces ``verl.utils.reward_score.gsm8k`` exactly: the last 300 characters,
  strict regex ``#### (\\-?[0-9\\.\\,]+)`` (last match, commas removed) or flexible regex
  ``(\\-?[0-9\\.\\,]+)`` (last match that is not ``"."``, nothing removed), then *string* equality
  with the ground truth: ``score`` if equal, ``format_score`` if an answer was extracted but
  differs, 0 if none was.
- ``compat=None`` (default) keeps the same window and the same format requirement (strict still
  needs ``####`` followed by a number) but fixes verl's false negatives: the answer and the ground
  truth are compared as *numbers* (exact decimal arithmetic), so ``#### 1234.``, ``#### 1234.00``,
  ``#### $1,234`` and ``####1234`` all equal ``1234`` (verl: wrong or no answer); in flexible
  mode a sentence-final period (``... is 72.``) or a thousands separator no longer breaks the
  match; a ground truth given as ``int`` works (verl compares it to a str: never equal), and a
  missing one (None) raises instead of scoring the sample as wrong. ``pred`` is the canonical
  number (``"1234"``), so majority voting groups equal answers. Two things verl pays for are
  refused: a strict answer line holding a second number (``#### 72 or 73``, ``#### 72, 73``: two
  guesses, scored as a wrong answer whatever the first one is), and an answer inside ``<think>``
  reasoning (only the committed text counts: :mod:`judger.scorers.committed`).

In both modes a label given as GSM8K ships it (``answer``: the worked solution ending ``#### 72``)
is read as its final answer, as verl's GSM8K preprocessing reads it.

Both return ``{"score": float, "acc": bool, "pred": str | None}``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any, Literal

from judger.core.errors import NoResponseError
from judger.scorers.committed import committed_text, may_hold_reasoning, opens_reasoning
from judger.scorers.labels import missing_label

Method = Literal["strict", "flexible"]

CLIP_CHARS = 300

# verl's patterns, byte for byte
_VERL_STRICT = re.compile("#### (\\-?[0-9\\.\\,]+)")
_VERL_FLEXIBLE = re.compile("(\\-?[0-9\\.\\,]+)")
# ours: any spacing after ####, an optional currency sign, and the number must contain a digit
_STRICT = re.compile(r"####[ \t]*\$?[ \t]*(-?[ \t]*\$?[0-9.,]*[0-9][0-9.,]*)")
_FLEXIBLE = re.compile(r"-?\$?[0-9.,]*[0-9][0-9.,]*")
_DIGIT = re.compile(r"\d")


def _window(text: str) -> int:
    """Where the scored window (the last ``CLIP_CHARS`` characters) starts."""
    return max(0, len(text) - CLIP_CHARS)


def _last_match(pattern: re.Pattern[str], marker: str, text: str, start: int) -> re.Match[str] | None:
    """The last match of ``pattern`` at or after ``start``; every match begins with ``marker``.

    Equal to ``pattern.findall(text[start:])[-1]`` for these patterns (matches never overlap:
    the number after the marker cannot contain ``#``), but scans back from the end with ``rfind``
    instead of collecting every match: the common case is one match, near the end.
    """
    end = len(text)
    while True:
        at = text.rfind(marker, start, end)
        if at < 0:
            return None
        found = pattern.match(text, at)
        if found is not None:
            return found
        end = at + len(marker) - 1  # the next occurrence must start before ``at``


def extract_solution_verl(solution_str: str, method: Method = "strict") -> str | None:
    """verl's ``extract_solution``: the raw answer string, or None."""
    start = _window(solution_str)
    if method == "strict":
        found = _last_match(_VERL_STRICT, "#### ", solution_str, start)
        return found.group(1).replace(",", "") if found is not None else None
    if method != "flexible":
        raise ValueError(f"method must be 'strict' or 'flexible', got {method!r}")
    matches = _VERL_FLEXIBLE.findall(solution_str, start)
    if not matches:
        return None
    answer = matches[0]
    # verl walks backwards and keeps the last value it looked at, even when all are "."
    for answer in reversed(matches):
        if answer not in ("", "."):
            break
    return answer


def canonical_number(text: Any) -> str | None:
    """``text`` as a canonical decimal string (``"1,234.00"`` -> ``"1234"``), or None if not a number."""
    if isinstance(text, bool):
        return None
    if isinstance(text, int):
        return str(text)
    if isinstance(text, float):
        text = repr(text)
    elif not isinstance(text, str):
        return None
    return _canonical_text(text)


# answers repeat a lot across a batch (and labels always do): parse each distinct text once
@lru_cache(maxsize=1 << 16)
def _canonical_text(text: str) -> str | None:
    if text.isdigit():
        return text.lstrip("0") or "0"
    cleaned = _clean(text).rstrip(".")
    # an exponent in a label could ask int() for a billion digits; GSM8K answers never have one
    if not cleaned or len(cleaned) > 100 or "e" in cleaned or "E" in cleaned:
        return None
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        return None
    if not value.is_finite():
        return None
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")


def _clean(text: str) -> str:
    return text.replace(",", "").replace("$", "").replace(" ", "").replace("\t", "")


def _normalise(text: str) -> str:
    """A canonical number when ``text`` is one (``"1.2.3"`` is not: it stays as written)."""
    number = _canonical_text(text)
    return number if number is not None else _clean(text)


def hedged(text: str, end: int) -> str | None:
    """The answer line from ``end`` back to its ``####`` when the rest of that line holds another
    number (``#### 72 or 73``): two guesses are no answer. None for a line with one number."""
    line_end = text.find("\n", end)
    if line_end < 0:
        line_end = len(text)
    if _DIGIT.search(text, end, line_end) is None:  # no slice, no Python loop: this runs per sample
        return None
    return text[text.rfind("####", 0, end) + 4 : line_end].strip()


def _extract(solution_str: str, method: Method) -> tuple[str | None, int]:
    """:func:`extract_solution`'s answer and where its match starts (-1: no answer)."""
    start = _window(solution_str)
    if method == "strict":
        found = _last_match(_STRICT, "####", solution_str, start)
        if found is None:
            return None, -1
        return hedged(solution_str, found.end()) or _normalise(found.group(1)), found.start()
    if method != "flexible":
        raise ValueError(f"method must be 'strict' or 'flexible', got {method!r}")
    matches = list(_FLEXIBLE.finditer(solution_str, start))
    return (_normalise(matches[-1][0]), matches[-1].start()) if matches else (None, -1)


def extract_solution(solution_str: str, method: Method = "strict") -> str | None:
    """judger's extraction: the answer as a canonical number string, or None if there is none.

    A strict answer line with a second number gives that line as written (:func:`hedged`), which
    equals no label. The answer is read from the committed text: where the one found may lie in
    ``<think>`` reasoning (:func:`~judger.scorers.committed.may_hold_reasoning`), it is read again
    from :func:`~judger.scorers.committed.committed_text`."""
    answer, at = _extract(solution_str, method)
    if at >= 0 and may_hold_reasoning(solution_str, at):
        answer, _ = _extract(committed_text(solution_str), method)
    return answer


def final_answer_label(ground_truth: Any) -> Any:
    """A label as GSM8K ships it (the worked solution ending ``#### 72``) reduced to its final
    answer, as verl's GSM8K preprocessing does (commas removed); any other label unchanged."""
    if isinstance(ground_truth, str) and "####" in ground_truth:
        return ground_truth.rsplit("####", 1)[1].strip().replace(",", "")
    return ground_truth


def _label(ground_truth: Any) -> str:
    if ground_truth is None:
        # a missing label is a broken sample, not a wrong answer
        raise missing_label("gsm8k scorer")
    if isinstance(ground_truth, str):
        ground_truth = final_answer_label(ground_truth)
        number = _canonical_text(ground_truth)
    else:
        number = canonical_number(ground_truth)
    return number if number is not None else _clean(str(ground_truth)).strip()


# canonical forms of str labels, shared by the batch scorers (a plain dict: cheaper than lru_cache)
_LABELS: dict[str, str] = {}
_MAX_LABELS = 1 << 16

Scorer = Callable[[Any, Any], dict[str, Any]]
BatchScorer = Callable[[Sequence[Any], Sequence[Any]], list[Any]]


@lru_cache(maxsize=64)
def make_scorer(
    compat: Literal["verl"] | None = None,
    method: Method = "strict",
    format_score: float = 0.0,
    score: float = 1.0,
) -> Scorer:
    """``scorer(solution_str, ground_truth) -> dict`` with the options bound."""
    _check_options(compat, method)
    right, wrong = float(score), float(format_score)

    def scorer(solution_str: Any, ground_truth: Any) -> dict[str, Any]:
        if not isinstance(solution_str, str):
            raise _str_required(solution_str)
        if compat == "verl":
            answer = extract_solution_verl(solution_str, method)
            correct = answer is not None and answer == final_answer_label(ground_truth)
        else:
            label = _label(ground_truth)
            answer = extract_solution(solution_str, method)
            correct = answer is not None and answer == label
        if answer is None:
            return {"score": 0.0, "acc": False, "pred": None}
        return {"score": right if correct else wrong, "acc": correct, "pred": answer}

    return scorer


@lru_cache(maxsize=64)
def make_batch_scorer(
    compat: Literal["verl"] | None = None,
    method: Method = "strict",
    format_score: float = 0.0,
    score: float = 1.0,
) -> BatchScorer:
    """``batch(responses, labels) -> list``: :func:`make_scorer`'s result for each pair, or the
    exception it raised (:class:`NoResponseError` for a null response). Strict extraction is
    inlined in the loop: a Python call per sample would be a large part of the cost."""
    one = make_scorer(compat, method, format_score, score)
    if method != "strict":

        def each(responses: Sequence[Any], labels: Sequence[Any]) -> list[Any]:
            out: list[Any] = []
            for response, label in zip(responses, labels):
                try:
                    out.append(one(response, label))
                except Exception as exc:
                    out.append(NoResponseError() if response is None else exc)
            return out

        return each

    right, wrong = float(score), float(format_score)
    if compat == "verl":
        return _verl_strict_batch(right, wrong)
    return _strict_batch(right, wrong, one)


def _verl_strict_batch(right: float, wrong: float) -> BatchScorer:
    match_at = _VERL_STRICT.match

    def verl_strict(responses: Sequence[Any], labels: Sequence[Any]) -> list[Any]:
        out: list[Any] = []
        append = out.append
        back = -CLIP_CHARS  # rfind's start: before 0 it is 0, as in a slice
        for text, label in zip(responses, labels):
            try:
                at = text.rfind("#### ", back)
                if at < 0:
                    append({"score": 0.0, "acc": False, "pred": None})
                    continue
                # "#### <digits>" ending the response needs no regex (nothing after it can start
                # another match, so it is the last one)
                answer = text[at + 5 :]
                if not (answer.isdigit() and answer.isascii()):
                    found = match_at(text, at) or _last_match(_VERL_STRICT, "#### ", text, _window(text))
                    if found is None:
                        append({"score": 0.0, "acc": False, "pred": None})
                        continue
                    answer = found[1].replace(",", "")
                if type(label) is str and "####" in label:
                    label = final_answer_label(label)
                correct = answer == label
                append({"score": right if correct else wrong, "acc": correct, "pred": answer})
            except Exception as exc:
                append(exc if isinstance(text, str) else _not_a_str(text))
        return out

    return verl_strict


def _strict_batch(right: float, wrong: float, one: Scorer) -> BatchScorer:
    match_at = _STRICT.match

    def strict(responses: Sequence[Any], labels: Sequence[Any]) -> list[Any]:
        out: list[Any] = []
        append = out.append
        canonical = _LABELS  # labels repeat across batches: normalise each once
        back = -CLIP_CHARS  # rfind's start: before 0 it is 0, as in a slice
        for text, label in zip(responses, labels):
            try:
                # the label first: a missing one fails the sample whatever the response holds
                gold = canonical.get(label) if type(label) is str else None
                if gold is None:
                    gold = _label(label)
                    if type(label) is str:
                        if len(canonical) >= _MAX_LABELS:
                            canonical.clear()
                        canonical[label] = gold
                at = text.rfind("####", back)
                if at < 0:
                    append({"score": 0.0, "acc": False, "pred": None})
                    continue
                # "####" and digits ending the response need no regex (the spaces between them are
                # what the regex allows, and nothing after them can start another match)
                answer = text[at + 4 :].lstrip(" ")
                if answer.isdigit() and answer.isascii():
                    # the answer may be reasoning (committed.opens_reasoning, its first test inlined:
                    # a response that starts with a letter, as most do, cannot open with <think>)
                    if (text[0] == "<" or text[0] <= " ") and opens_reasoning(text):
                        append(one(text, label))
                        continue
                    if answer[0] == "0":
                        answer = answer.lstrip("0") or "0"
                else:
                    found = match_at(text, at) or _last_match(_STRICT, "####", text, _window(text))
                    if found is None:
                        append({"score": 0.0, "acc": False, "pred": None})
                        continue
                    if "</think>" in text[found.start() :] or (
                        (text[0] == "<" or text[0] <= " ") and opens_reasoning(text)
                    ):  # committed.may_hold_reasoning, inlined as above: the scorer reads it
                        append(one(text, label))
                        continue
                    end = found.end()
                    # a hedge needs more of the line after the number: most answers end there
                    tail = end < len(text) and text[end] != "\n"
                    answer = (tail and hedged(text, end)) or _normalise(found[1])
                if answer == gold:
                    append({"score": right, "acc": True, "pred": answer})
                else:
                    append({"score": wrong, "acc": False, "pred": answer})
            except Exception as exc:
                # a response that is not a str is told apart here, off the common path
                append(exc if isinstance(text, str) else _not_a_str(text))
        return out

    return strict


def _not_a_str(text: Any) -> Exception:
    """A batch's error for a response that is not a str: a null one has nothing to judge."""
    return NoResponseError() if text is None else _str_required(text)


def _str_required(text: Any) -> TypeError:
    return TypeError(f"gsm8k scorer: the response must be a str, got {type(text).__name__}")


def _check_options(compat: Any, method: Any) -> None:
    if compat not in (None, "verl"):
        raise ValueError(f"compat must be 'verl' or None, got {compat!r}")
    if method not in ("strict", "flexible"):
        raise ValueError(f"method must be 'strict' or 'flexible', got {method!r}")


def compute_score(
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    *,
    compat: Literal["verl"] | None = None,
    method: Method = "strict",
    format_score: float = 0.0,
    score: float = 1.0,
) -> dict[str, Any]:
    """Score a GSM8K response: ``score`` if correct, ``format_score`` if an answer was found but is
    wrong, 0 if none was. See the module docstring for what ``compat="verl"`` changes."""
    return make_scorer(compat, method, format_score, score)(solution_str, ground_truth)
