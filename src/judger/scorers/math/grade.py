"""Math-Verify-grade equivalence of two answers, for use inside a killable worker process.

Math-Verify's own timeouts are ``signal.alarm`` based (whole seconds, main thread only); here they
are switched off and the process pool's deadline (SIGKILL) bounds the work instead. On top of
Math-Verify this module fixes its known false positive: two tiny numbers that both round to 0 at
6 decimals (``1/2004!`` vs ``1/2006!``, ``1/2^99`` vs ``1/2^98``) are compared by relative size.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Any

# Math-Verify warns on every call that its timeout is disabled: that is deliberate here.
for _name in ("math_verify", "math_verify.parser", "math_verify.grader", "math_verify.utils"):
    logging.getLogger(_name).setLevel(logging.ERROR)

TINY = 1e-6
"""Below this magnitude Math-Verify's 6-decimal rounding cannot tell numbers apart."""
REL_TOL = 1e-9


@lru_cache(maxsize=1)
def _configs() -> tuple[Any, Any]:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig

    return [LatexExtractionConfig()], [LatexExtractionConfig(), ExprExtractionConfig()]


def parse_boxed(answer: str) -> list[Any]:
    """Math-Verify's parse of ``\\boxed{answer}`` (LaTeX extraction), no signal-based timeout."""
    from math_verify import parse

    latex_only, _ = _configs()
    return parse("\\boxed{" + answer + "}", latex_only, parsing_timeout=None)


def parse_response(text: str) -> list[Any]:
    """Math-Verify's parse of a whole response (LaTeX and plain expressions), no timeout."""
    from math_verify import parse

    _, both = _configs()
    return parse(text, both, parsing_timeout=None)


def _as_number(value: Any) -> Any:
    import sympy

    if isinstance(value, sympy.Basic) and getattr(value, "is_number", False) and not value.free_symbols:
        try:
            number = sympy.N(value, 40)
        except Exception:
            return None
        if number.is_real:
            return number
    return None


def _tiny_mismatch(gold: list[Any], pred: list[Any]) -> bool:
    """True when the verdict rests on rounding two tiny, different numbers to the same 0."""
    golds = [n for n in map(_as_number, gold) if n is not None]
    preds = [n for n in map(_as_number, pred) if n is not None]
    if not golds or not preds:
        return False
    for g in golds:
        for p in preds:
            scale = max(abs(g), abs(p))
            if scale >= TINY:
                return False  # an ordinary-size pair: Math-Verify's rounding is meaningful there
            if abs(g - p) <= REL_TOL * scale:
                return False
    return True


def verify_parsed(gold: list[Any], pred: list[Any]) -> bool:
    """Math-Verify's ``verify(gold, pred)`` (gold first), minus the tiny-number false positive."""
    from math_verify import verify

    if not gold or not pred:
        return False
    if not verify(gold, pred, float_rounding=6, timeout_seconds=None):
        return False
    return not _tiny_mismatch(gold, pred)


def equivalent(answer: str, ground_truth: str) -> bool:
    """Whether the extracted ``answer`` equals ``ground_truth`` (both LaTeX, as found in ``\\boxed{}``)."""
    return verify_parsed(parse_boxed(ground_truth), parse_boxed(answer))
