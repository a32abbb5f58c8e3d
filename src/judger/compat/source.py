"""Which judger a trainer adapter runs, named the way every judger command names one.

A trainer that loads a reward by import path (slime's ``--custom-rm-path``, AReaL's ``reward_fn``,
OpenRLHF's reward file, rLLM's evaluator) gives the function no place for options: there the judger
is named by the environment variable ``JUDGER_CONFIG``, read when the first sample is judged:

- a preset: ``math``, ``gsm8k``, ``GSM8KJudgerConfig`` (:func:`judger.presets.lookup`);
- a file: ``path/to/config.py`` or ``path/to/config.py:NAME``;
- a module: ``pkg.module:name`` (or ``pkg.module``, its one config).

Files and modules are read by :mod:`judger.presets.loading`, the loader of ``judger score -c`` and
``judger serve``, so a name means the same everywhere. :class:`JudgerSource` holds the name and
builds the judger once per process (a worker forked after the parent built one builds its own:
a judger's threads and pools do not survive a fork), and pickles as the name alone.
"""

from __future__ import annotations

import os
import pickle
import threading
from collections.abc import Hashable
from typing import Any

from judger.compat.verl.router import default_judger_config
from judger.core.errors import ConfigError
from judger.core.judger import BaseJudger
from judger.judgers.config import JudgerConfig
from judger.presets import lookup
from judger.presets.loading import load_preset, load_target

ENV_VAR = "JUDGER_CONFIG"
FORMS = "a preset name such as 'math', 'path/to/config.py[:NAME]' or 'pkg.module:name'"


def _is_spec(text: str) -> bool:
    """A file or module spec rather than a preset name (preset names are single words)."""
    return ":" in text or "/" in text or "." in text or text.endswith(".py")


def resolve_judger(source: Any) -> BaseJudger:
    """A judger from a judger, a config (anything with ``build()``), a preset name, ``"verl"`` (verl's
    dispatch by ``data_source``), an ``http(s)://`` URL of a reward endpoint, or a file or module
    spec (``path/to/config.py[:NAME]``, ``pkg.module:name``)."""
    if isinstance(source, BaseJudger):
        return source
    if hasattr(source, "build") and not isinstance(source, (str, type)):
        return source.build()
    if isinstance(source, str):
        text = source.strip()
        if text.startswith(("http://", "https://")):
            return JudgerConfig(judger_name="remote", reward_handler=text).build()
        if text.lower() == "verl":
            return default_judger_config().build()
        target = load_target(text) if _is_spec(text) else load_preset(text)
        return target if isinstance(target, BaseJudger) else target.build()
    raise TypeError(f"cannot make a judger from {type(source).__name__}: {source!r}")


def check_name(text: str) -> None:
    """Refuse, with the loader's message, a name :func:`resolve_judger` could not build from (nothing
    is built: a preset's class is looked up, a file or module spec is loaded)."""
    text = text.strip()
    if text.startswith(("http://", "https://")) or text.lower() == "verl":
        return
    if _is_spec(text):
        load_target(text)
    else:
        lookup(text)


def from_environment(variable: str = ENV_VAR) -> str:
    """The judger named by ``variable``; a ConfigError saying how to set it when it is unset."""
    value = os.environ.get(variable, "").strip()
    if not value:
        raise ConfigError(
            f"${variable} is not set: name the judger this reward runs ({FORMS}), e.g. "
            f"{variable}=math in the trainer's environment"
        )
    return value


_built: dict[Hashable, tuple[int, BaseJudger]] = {}
_built_lock = threading.Lock()


class JudgerSource:
    """A judger named now and built on first use, once per process.

    ``source`` is anything :func:`resolve_judger` takes; None reads ``$JUDGER_CONFIG`` when the judger
    is first needed. It pickles as the name, so a function holding one can be sent to worker
    processes; there every copy of the same name shares one judger (AReaL pickles its reward function
    with every call), built on the first call in that process.
    """

    def __init__(self, source: Any = None, variable: str = ENV_VAR) -> None:
        self.source = source
        self.variable = variable
        if isinstance(source, str):
            check_name(source)  # a name no judger answers to is refused here, not at the first sample

    def describe(self) -> str:
        if self.source is None:
            return f"${self.variable}"
        return self.source if isinstance(self.source, str) else type(self.source).__name__

    def _key(self) -> Hashable:
        if self.source is None:
            return ("environment", self.variable, from_environment(self.variable))
        if isinstance(self.source, str):
            return ("name", self.source)
        if isinstance(self.source, BaseJudger):
            return ("judger", id(self.source))
        try:  # a config: copies unpickled from the same bytes share a judger
            return ("config", pickle.dumps(self.source))
        except Exception:
            return ("object", id(self.source))

    def get(self) -> BaseJudger:
        if isinstance(self.source, BaseJudger):
            return self.source
        key = self._key()
        pid = os.getpid()
        found = _built.get(key)
        if found is not None and found[0] == pid:
            return found[1]
        with _built_lock:
            found = _built.get(key)
            if found is None or found[0] != pid:  # none yet, or one inherited through a fork
                source = from_environment(self.variable) if self.source is None else self.source
                found = _built[key] = (pid, resolve_judger(source))
            return found[1]

    def __repr__(self) -> str:
        return f"JudgerSource({self.describe()!r})"
