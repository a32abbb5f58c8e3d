"""Presets are discovered from their modules: adding one needs no table edit."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

import judger
import judger.presets as presets
from judger import JudgerConfig

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]


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


def test_a_preset_config_discovery_would_skip_is_an_error_naming_the_rule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from judger.presets.gsm8k import GSM8KJudgerConfig

    module = types.ModuleType("judger.presets.misnamed_for_test")
    misnamed = type("MisnamedConfig", (GSM8KJudgerConfig,), {"__module__": module.__name__})
    private = type("_PrivateConfig", (GSM8KJudgerConfig,), {"__module__": module.__name__})
    module.MisnamedConfig = misnamed  # type: ignore[attr-defined]
    module._PrivateConfig = private  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    with pytest.raises(TypeError, match=r"MisnamedConfig is a judger config.*ends in 'JudgerConfig'"):
        presets._load("misnamed_for_test")
    presets._loaded.discard("misnamed_for_test")
