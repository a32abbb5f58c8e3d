"""Built-in judger configs. Each module holds one family; names load on first use."""

from __future__ import annotations

import importlib

_PRESETS: dict[str, str] = {
    "GSM8KJudgerConfig": "judger.presets.gsm8k",
    "QAExactMatchJudgerConfig": "judger.presets.qa",
    "CodeJudgerConfig": "judger.presets.code",
    "MathJudgerConfig": "judger.presets.math",
    "MathVerifyJudgerConfig": "judger.presets.math_verify",
    "DapoMathJudgerConfig": "judger.presets.dapo",
    "GEO3KJudgerConfig": "judger.presets.geo3k",
}

__all__ = sorted(_PRESETS)


def __getattr__(name: str) -> object:
    module = _PRESETS.get(name)
    if module is None:
        raise AttributeError(f"module 'judger.presets' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
