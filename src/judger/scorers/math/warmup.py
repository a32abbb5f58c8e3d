"""Imported by the shared process pool before its workers take calls (its preload): grades a few
answers through Math-Verify, so that a worker starts with the LaTeX parser built and sympy's
caches filled, and no sample's deadline pays for their first use.

Under multiprocessing's fork server this runs once, in the fork server, and every worker forks
from the warm state; under ``spawn`` each worker runs it before it reports ready.
"""

from __future__ import annotations

import logging

from judger.scorers.math.reward import compute_score

# the symbolic paths of the default grader: an equal and an unequal closed form, an expression,
# complex numbers, an ordered tuple, a decimal approximation
_PAIRS = (
    ("\\frac{\\pi}{2}", "\\pi/2"),
    ("\\frac{\\pi}{3}", "\\pi/2"),
    ("x^2+1", "1+x^2"),
    ("3+2i", "2i+3"),
    ("(1, \\sqrt{2})", "(\\sqrt{2}, 1)"),
    ("0.7854", "\\frac{\\pi}{4}"),
)


def warm() -> None:
    """Grade each warm-up pair once; a pair that fails is logged at debug level and skipped."""
    for answer, gold in _PAIRS:
        try:
            compute_score(answer, gold, extracted=True)
        except Exception:  # a failure here leaves that path cold, nothing more
            logging.getLogger(__name__).debug("warm-up of %r failed", answer, exc_info=True)


warm()
