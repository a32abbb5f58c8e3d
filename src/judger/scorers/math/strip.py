"""verl ``math_reward``'s answer normalisation (Hendrycks MATH ``strip_string``), quirk for quirk.

Used only by ``compat="verl"``. The quirks matter for exactness: some inputs make a step raise
(``\\sqrt`` or ``\\frac`` at the very end, ``\\text{ `` twice), and verl then compares the two raw
strings instead; :func:`is_equiv_verl` does the same.
"""

from __future__ import annotations

from typing import Any


def _fix_fracs(text: str) -> str:
    """``\\frac12`` -> ``\\frac{1}{2}``, ``\\frac1{72}`` -> ``\\frac{1}{72}``; IndexError on empty pieces."""
    parts = text.split("\\frac")
    out = [parts[0]]
    for part in parts[1:]:
        out.append("\\frac")
        if part[0] == "{":  # an empty piece raises IndexError here, as in verl
            out.append(part)
            continue
        if len(part) < 2:
            return text
        first, second, tail = part[0], part[1], part[2:]
        if second == "{":
            out.append("{" + first + "}" + second + tail)
        else:
            out.append("{" + first + "}{" + second + "}" + tail)
    return "".join(out)


def _fix_a_slash_b(text: str) -> str:
    """``3/4`` -> ``\\frac{3}{4}`` when both sides are plain integers written canonically."""
    pieces = text.split("/")
    if len(pieces) != 2:
        return text
    try:
        num, den = int(pieces[0]), int(pieces[1])
    except ValueError:
        return text
    if text != f"{num}/{den}":
        return text
    return "\\frac{" + str(num) + "}{" + str(den) + "}"


def _remove_right_units(text: str) -> str:
    """Drop a trailing ``\\text{ unit}``; AssertionError if ``\\text{ `` occurs more than once."""
    if "\\text{ " not in text:
        return text
    parts = text.split("\\text{ ")
    if len(parts) != 2:
        raise AssertionError("more than one '\\text{ ' in the answer")
    return parts[0]


def _fix_sqrt(text: str) -> str:
    """``\\sqrt3`` -> ``\\sqrt{3}``; IndexError when ``\\sqrt`` is followed by nothing."""
    if "\\sqrt" not in text:
        return text
    parts = text.split("\\sqrt")
    out = [parts[0]]
    for part in parts[1:]:
        if part[0] != "{":
            out.append("\\sqrt{" + part[0] + "}" + part[1:])
        else:
            out.append("\\sqrt" + part)
    return "".join(out)


def strip_string(text: str) -> str:
    """Normalise a MATH answer the way verl's ``math_reward.strip_string`` does (may raise, like it)."""
    text = text.replace("\n", "").replace("\\!", "").replace("\\\\", "\\")
    text = text.replace("tfrac", "frac").replace("dfrac", "frac")
    text = text.replace("\\left", "").replace("\\right", "")
    text = text.replace("^{\\circ}", "").replace("^\\circ", "")
    text = text.replace("\\$", "")
    text = _remove_right_units(text)
    text = text.replace("\\\\%", "").replace("\\%", "")
    text = text.replace(" .", " 0.").replace("{.", "{0.")
    if not text:
        return text
    if text[0] == ".":
        text = "0" + text
    sides = text.split("=")
    if len(sides) == 2 and len(sides[0]) <= 2:
        text = sides[1]
    text = _fix_sqrt(text)
    text = text.replace(" ", "")
    text = _fix_fracs(text)
    if text == "0.5":
        text = "\\frac{1}{2}"
    return _fix_a_slash_b(text)


def is_equiv_verl(answer: Any, ground_truth: Any) -> bool:
    """verl's ``is_equiv``: equal after :func:`strip_string`, or equal raw if normalising raised."""
    if answer is None and ground_truth is None:
        return True
    if answer is None or ground_truth is None:
        return False
    try:
        return strip_string(answer) == strip_string(ground_truth)
    except Exception:
        return answer == ground_truth
