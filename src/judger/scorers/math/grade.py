"""Math-Verify-grade equivalence of two answers, for use inside a killable worker process.

Math-Verify's own timeouts are ``signal.alarm`` based (whole seconds, main thread only); here they
are switched off and the process pool's deadline (SIGKILL) bounds the work instead. On top of
Math-Verify this module fixes its known false positive: two tiny numbers that both round to 0 at
6 decimals (``1/2004!`` vs ``1/2006!``, ``1/2^99`` vs ``1/2^98``) are compared by relative size.
"""

from __future__ import annotations

import logging
import warnings
from functools import lru_cache
from typing import Any

# Math-Verify warns on every call that its timeout is disabled: that is deliberate here.
for _name in ("math_verify", "math_verify.parser", "math_verify.grader", "math_verify.utils"):
    logging.getLogger(_name).setLevel(logging.ERROR)

TINY = 1e-6
"""Below this magnitude Math-Verify's 6-decimal rounding cannot tell numbers apart."""
REL_TOL = 1e-9


PARSER_PROBE = "50\\%"
"""A percent number: latex2sympy2_extended 1.11 fails on it under antlr4-python3-runtime 4.9.3."""


def latex_parser_problem() -> str | None:
    """Why latex2sympy cannot parse LaTeX in this environment (one line naming the fix), or None."""
    try:
        from latex2sympy2_extended import latex2sympy

        latex2sympy(PARSER_PROBE)
    except ImportError:
        return None  # Math-Verify is missing altogether: its import raises its own clear error
    except Exception as exc:
        try:
            from importlib.metadata import version

            antlr = version("antlr4-python3-runtime")
        except Exception:
            antlr = "unknown"
        return (
            f"latex2sympy cannot parse LaTeX here ({type(exc).__name__}: {exc}) with "
            f"antlr4-python3-runtime {antlr} (hydra-core / omegaconf, e.g. from verl, pin 4.9.3). "
            "judger grades plain numbers, percents and units without it, but other answers that need "
            "LaTeX parsing may be graded wrong. Fix: run judger where antlr4-python3-runtime==4.13.2 "
            "is installed (its own environment: `judger serve`, or a Ray actor with its own runtime_env)"
        )
    return None


@lru_cache(maxsize=1)
def check_latex_parser() -> str | None:
    """Run :func:`latex_parser_problem` once per process and warn once if there is one."""
    problem = latex_parser_problem()
    if problem is not None:
        warnings.warn(problem, RuntimeWarning, stacklevel=3)
        logging.getLogger(__name__).warning("judger: %s", problem)
    return problem


@lru_cache(maxsize=1)
def _configs() -> tuple[Any, Any]:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig

    check_latex_parser()

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


def real_value(value: Any) -> Any:
    """A parsed answer's real value at 40 digits, or None when it is not a real number."""
    return _as_number(value)


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
