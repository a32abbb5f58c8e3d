"""A preset's scorer must take every option its config passes it, checked when the judger is built.

:class:`~judger.presets.base.ScorerJudgerConfig` passes ``scorer_options()`` to the scorer with
every sample, and its default passes ``compat`` (every preset has the field). A scorer that does
not take one would fail each sample with a TypeError; the build refuses it instead, naming the
option, the scorer and the two fixes.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from typing import Any

from judger.core.errors import ConfigError


@functools.lru_cache(maxsize=256)
def _refused(scorer: Callable[..., Any], names: frozenset[str]) -> tuple[str, ...]:
    try:
        parameters = inspect.signature(scorer).parameters.values()
    except (TypeError, ValueError):  # no signature to read (a builtin): the first sample will say
        return ()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return ()
    taken = {p.name for p in parameters if p.kind is not inspect.Parameter.POSITIONAL_ONLY}
    return tuple(sorted(names - taken))


def check_scorer_options(config: str, scorer: Callable[..., Any], options: Iterable[str]) -> None:
    """Raise :class:`ConfigError` when ``scorer`` takes no keyword for one of ``options``."""
    refused = _refused(scorer, frozenset(options))
    if refused:
        name = getattr(scorer, "__qualname__", repr(scorer))
        inherited = (
            " (ScorerJudgerConfig.scorer_options passes compat to every preset)"
            if "compat" in refused
            else ""
        )
        raise ConfigError(
            f"{config}: its scorer {name}() takes no {', '.join(map(repr, refused))} keyword, which "
            f"{config}.scorer_options() passes with every sample{inherited}: add the parameter to "
            f"the scorer (compat: honour compat='verl' or refuse it), or leave the option out of "
            "scorer_options()"
        )
