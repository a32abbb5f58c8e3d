"""Presets are discovered from their modules: adding one needs no table edit."""

from __future__ import annotations

import subprocess
import sys

import judger
import judger.presets as presets
from judger import JudgerConfig


def test_every_preset_module_class_is_found() -> None:
    assert presets.__all__ == [
        "CodeJudgerConfig",
        "DapoMathJudgerConfig",
        "GEO3KJudgerConfig",
        "GSM8KJudgerConfig",
        "MathJudgerConfig",
        "MathVerifyJudgerConfig",
        "QAExactMatchJudgerConfig",
    ]
    for name in presets.__all__:
        cls = getattr(presets, name)
        assert issubclass(cls, JudgerConfig) and cls.__module__.startswith("judger.presets.")
        assert getattr(judger, name) is cls


def test_asking_for_one_preset_loads_only_what_it_needs() -> None:
    code = (
        "import sys\n"
        "from judger.presets import GSM8KJudgerConfig\n"
        "print('judger.presets.math' in sys.modules, 'judger.presets.code' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
