"""Finding the judger a name asks for: a config in a Python file, a module, or a preset.

Shared by ``judger score`` and ``judger serve`` (``-c``, ``--preset``) and by the trainer adapters
of :mod:`judger.compat` (their ``JUDGER_CONFIG``), so every way of naming a judger reads the same.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import sys
from pathlib import Path
from typing import Any

from judger.core.errors import ConfigError
from judger.core.judger import BaseJudger
from judger.judgers.config import ComposedJudgerConfig, JudgerConfig
from judger.judgers.handlers import import_object

Servable = BaseJudger | JudgerConfig | ComposedJudgerConfig
_DEFAULT_NAMES = ("judger_config", "config", "judger")


def parse_overrides(items: list[str] | None) -> dict[str, Any]:
    """``["timeout=5", "judger_name=gsm8k"]`` -> ``{"timeout": 5, "judger_name": "gsm8k"}`` (JSON values
    where they parse, strings otherwise)."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE")
        try:
            out[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            out[key.strip()] = raw
    return out


def _importable_as(path: Path, name: str) -> bool:
    """Whether ``name`` can be this file's module name without hiding another module."""
    if not name.isidentifier() or name in sys.modules:
        return False
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    return found is None or (found.origin is not None and Path(found.origin).resolve() == path.resolve())


def load_file(path: Path) -> Any:
    """Import a Python file as a module registered in ``sys.modules``.

    Its folder goes on ``sys.path`` and the module is named after the file when that hides nothing
    importable (a ``ray.py`` must not shadow Ray), so functions defined in it pickle by reference
    and worker processes and Ray actors can import them too.
    """
    name = path.stem
    if not _importable_as(path, name):
        name = f"_judger_config_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"cannot load {path} as a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise ConfigError(f"{path} failed to load: {type(exc).__name__}: {exc}") from exc
    return module


def _pick(module: Any, where: str) -> Any:
    for name in _DEFAULT_NAMES:
        if hasattr(module, name):
            return getattr(module, name)
    found = {
        name: value
        for name, value in vars(module).items()
        if not name.startswith("_") and isinstance(value, (JudgerConfig, ComposedJudgerConfig, BaseJudger))
    }
    if len(found) == 1:
        return next(iter(found.values()))
    if not found:
        raise ConfigError(f"{where} defines no judger config; name it 'judger_config' or give {where}:NAME")
    raise ConfigError(
        f"{where} defines several judger configs ({', '.join(sorted(found))}); give {where}:NAME"
    )


def _materialise(obj: Any, overrides: dict[str, Any], where: str) -> Servable:
    try:
        return _instantiate(obj, overrides, where)
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"{where}: {type(exc).__name__}: {exc}") from exc


def _instantiate(obj: Any, overrides: dict[str, Any], where: str) -> Servable:
    if isinstance(obj, type) and issubclass(obj, (JudgerConfig, ComposedJudgerConfig)):
        return obj(**overrides)
    if isinstance(obj, (JudgerConfig, ComposedJudgerConfig)):
        if not overrides:
            return obj
        cfg = obj.model_copy(deep=False)
        for key, value in overrides.items():
            setattr(cfg, key, value)  # validated: JudgerConfig has validate_assignment
        return cfg
    if isinstance(obj, BaseJudger):
        if overrides:
            raise ConfigError(f"{where} is a built judger; --set applies to configs only")
        return obj
    if callable(obj) and not _needs_arguments(obj):
        return _materialise(obj(**overrides), {}, where)
    raise ConfigError(
        f"{where} is a {type(obj).__name__}, not a JudgerConfig, a ComposedJudgerConfig, a Judger "
        "or a function of no required arguments returning one"
    )


def _needs_arguments(fn: Any) -> bool:
    """A config factory takes no required arguments; a reward function (a common mix-up) does."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    required = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return any(p.default is inspect.Parameter.empty and p.kind in required for p in params)


def load_preset(name: str, overrides: dict[str, Any] | None = None) -> Servable:
    """A preset config from :mod:`judger.presets` by class name (``GSM8KJudgerConfig``) or short
    name (``gsm8k``, ``math``), built with ``overrides``."""
    from judger.presets import lookup

    try:
        cls = lookup(name)
    except ImportError as exc:  # a preset module whose optional dependency is missing
        raise ConfigError(f"preset {name!r} is not available: {exc}") from exc
    return _materialise(cls, dict(overrides or {}), f"preset {cls.__name__}")


def load_target(spec: str, overrides: dict[str, Any] | None = None) -> Servable:
    """Resolve ``path/to/file.py[:NAME]``, ``package.module:NAME`` or ``package.module.NAME``."""
    overrides = dict(overrides or {})
    if ":" in spec and not spec.endswith(".py"):
        file_part, _, attr = spec.rpartition(":")
    else:
        file_part, attr = spec, ""
    if file_part.endswith(".py") or Path(file_part).is_file():
        return _materialise(_from_file(file_part, attr), overrides, spec)
    if ":" not in spec:
        module = _import_module(spec)
        if module is not None:
            return _materialise(_pick(module, spec), overrides, spec)
    try:
        target = import_object(spec)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return _materialise(target, overrides, spec)


def _from_file(file_part: str, attr: str) -> Any:
    """The object a config file names: ``attr``, or the one config it defines."""
    path = Path(file_part)
    if not path.is_file():
        raise ConfigError(f"config file {file_part!r} does not exist")
    module = load_file(path)
    if not attr:
        return _pick(module, file_part)
    if not hasattr(module, attr):
        raise ConfigError(f"{file_part} has no attribute {attr!r}")
    return getattr(module, attr)


def _import_module(spec: str) -> Any:
    """The module ``spec`` names, or None when it may be ``package.module.NAME`` instead."""
    try:
        return importlib.import_module(spec)
    except ImportError as exc:
        if "." not in spec:
            raise ConfigError(
                f"{spec!r} is neither a .py file, an importable module nor 'package.module:NAME' ({exc})"
            ) from None
    return None
