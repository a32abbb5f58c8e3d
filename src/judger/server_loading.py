"""What ``judger serve`` serves: a judger config found in a Python file, a module, or the presets."""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from judger.base import BaseJudger
from judger.config import ComposedJudgerConfig, JudgerConfig
from judger.handlers import import_object

Servable = BaseJudger | JudgerConfig | ComposedJudgerConfig
_DEFAULT_NAMES = ("judger_config", "config", "judger")


def parse_overrides(items: list[str] | None) -> dict[str, Any]:
    """``["timeout=5", "judger_name=gsm8k"]`` -> ``{"timeout": 5, "judger_name": "gsm8k"}`` (JSON values
    where they parse, strings otherwise)."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--set {item!r}: expected KEY=VALUE")
        try:
            out[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            out[key.strip()] = raw
    return out


def _load_file(path: Path) -> Any:
    name = f"judger_serve_config_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ValueError(f"cannot load {path} as a Python file")
    module = importlib.util.module_from_spec(spec)
    # registered so that handlers defined in the file can be pickled (process pools, Ray)
    sys.modules[name] = module
    spec.loader.exec_module(module)
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
        raise ValueError(f"{where} defines no judger config; name it 'judger_config' or give {where}:NAME")
    raise ValueError(
        f"{where} defines several judger configs ({', '.join(sorted(found))}); give {where}:NAME"
    )


def _materialise(obj: Any, overrides: dict[str, Any], where: str) -> Servable:
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
            raise ValueError(f"{where} is a built judger; --set applies to configs only")
        return obj
    if callable(obj):
        return _materialise(obj(**overrides), {}, where)
    raise ValueError(
        f"{where} is a {type(obj).__name__}; expected a JudgerConfig, a ComposedJudgerConfig, a Judger "
        "or a function returning one"
    )


def load_preset(name: str, overrides: dict[str, Any] | None = None) -> Servable:
    """``GSM8KJudgerConfig`` (any config class exported by :mod:`judger.presets`), built with overrides."""
    presets = importlib.import_module("judger.presets")
    try:
        cls = getattr(presets, name)
    except (AttributeError, ImportError) as exc:
        known = ", ".join(getattr(presets, "__all__", []))
        raise ValueError(f"unknown preset {name!r} ({exc}); known presets: {known}") from None
    return _materialise(cls, dict(overrides or {}), f"preset {name}")


def load_target(spec: str, overrides: dict[str, Any] | None = None) -> Servable:
    """Resolve ``path/to/file.py[:NAME]``, ``package.module:NAME`` or ``package.module.NAME``."""
    overrides = dict(overrides or {})
    if ":" in spec and not spec.endswith(".py"):
        file_part, _, attr = spec.rpartition(":")
    else:
        file_part, attr = spec, ""
    path = Path(file_part)
    if file_part.endswith(".py") or path.is_file():
        if not path.is_file():
            raise ValueError(f"config file {file_part!r} does not exist")
        module = _load_file(path)
        if attr:
            if not hasattr(module, attr):
                raise ValueError(f"{file_part} has no attribute {attr!r}")
            obj = getattr(module, attr)
        else:
            obj = _pick(module, file_part)
        return _materialise(obj, overrides, spec)
    if ":" not in spec:
        try:
            module = importlib.import_module(spec)
        except ImportError as exc:
            if "." not in spec:
                raise ValueError(
                    f"{spec!r} is neither a .py file, an importable module nor 'package.module:NAME' ({exc})"
                ) from None
        else:
            return _materialise(_pick(module, spec), overrides, spec)
    return _materialise(import_object(spec), overrides, spec)
