"""Built-in judger configs, one family per module, each over a pure scorer in ``judger.scorers``.

There is no table to edit: a preset is any public ``*JudgerConfig`` class defined in a module of
this package (``base``, ``inline``, ``loading``, ``scorer_options`` and ``xtuner_options`` hold
machinery, not presets). Modules load on first use, so ``import judger.presets`` costs nothing until
a preset is asked for. This is the one registry: ``judger`` exports (and ``judger.__all__`` lists)
what it finds, and tests/presets/test_discovery.py checks the docs' preset lists against it.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

from judger.core.errors import ConfigError

_MACHINERY = frozenset({"base", "inline", "loading", "scorer_options", "xtuner_options"})
_found: dict[str, type] = {}
_loaded: set[str] = set()


def _preset_modules() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in _MACHINERY)


def _load(module_name: str) -> ModuleType:
    module = importlib.import_module(f"{__name__}.{module_name}")
    if module_name not in _loaded:
        _loaded.add(module_name)
        for name, obj in vars(module).items():
            if not (inspect.isclass(obj) and obj.__module__ == module.__name__):
                continue
            if _is_preset(name):
                _found[name] = obj
            elif _is_config(obj) and not name.startswith("_"):
                # discovery would pass it over without a word: a preset no one can ask for
                raise TypeError(
                    f"{module.__name__}.{name} is a judger config, but preset discovery only finds "
                    "public classes whose name ends in 'JudgerConfig': rename it (e.g. "
                    f"{name.removesuffix('Config')}JudgerConfig), or make it private (_{name})"
                )
    return module


def _is_config(obj: type) -> bool:
    """A judger config class: a pydantic model that builds a judger."""
    from pydantic import BaseModel

    return issubclass(obj, BaseModel) and callable(getattr(obj, "build", None))


def _is_preset(name: str) -> bool:
    return name.endswith("JudgerConfig") and not name.startswith("_")


def _likely_first(name: str, modules: list[str]) -> list[str]:
    """``modules`` with the one whose name best prefixes the class name first (``gsm8k`` for
    ``GSM8KJudgerConfig``, ``math_verify`` for ``MathVerifyJudgerConfig``): usually one import."""
    stem = name.removesuffix("JudgerConfig").lower()
    matches = [m for m in modules if stem.startswith(m.replace("_", ""))]
    best = max(matches, key=len, default=None)
    return [best, *(m for m in modules if m != best)] if best else modules


def preset_names() -> list[str]:
    """Every preset's class name (loads every preset module)."""
    for module_name in _preset_modules():
        _load(module_name)
    return sorted(_found)


def short_name(class_name: str) -> str:
    """The name a preset is asked for by: ``GSM8KJudgerConfig`` -> ``gsm8k``."""
    return class_name.removesuffix("JudgerConfig").lower()


def lookup(name: str) -> type:
    """The preset config class asked for by ``name``: its class name (``GSM8KJudgerConfig``) or its
    short name (``gsm8k``, ``math``), in any case. The one lookup of the CLI, the server and TRL.

    Raises :class:`ConfigError` naming the closest preset and every known one.
    """
    wanted = name.strip().lower().removesuffix("judgerconfig")
    modules = _preset_modules()
    # usually one import: the module named like the preset first, the rest only if it is not there
    for module_name in [*_likely_first(wanted, modules), None]:
        found = next((cls for n, cls in _found.items() if short_name(n) == wanted), None)
        if found is not None or module_name is None:
            break
        if module_name not in _loaded:
            _load(module_name)
    if found is None:
        raise ConfigError(unknown_preset_message(name))
    return found


def unknown_preset_message(name: str) -> str:
    """What :func:`lookup` says of a name no preset answers to: the closest one, and every one."""
    import difflib  # only for this message: importing the package stays cheap

    names = preset_names()
    shorts = [short_name(n) for n in names]
    close = difflib.get_close_matches(name.strip().lower().removesuffix("judgerconfig"), shorts, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    known = ", ".join(f"{s} ({n})" for s, n in zip(shorts, names))
    return f"unknown preset {name!r}{hint}; known presets: {known}"


def __getattr__(name: str) -> object:
    if name == "__all__":
        return preset_names()
    if _is_preset(name):
        for module_name in _likely_first(name, _preset_modules()):
            if name in _found:
                break
            if module_name not in _loaded:
                _load(module_name)
        if name in _found:
            globals()[name] = _found[name]
            return _found[name]
    raise AttributeError(f"module 'judger.presets' has no attribute {name!r}")
