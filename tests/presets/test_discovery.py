"""Presets are discovered from their modules: adding one needs no table edit."""

from __future__ import annotations

import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

import judger
import judger.presets as presets
from judger import JudgerConfig

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]


DOCS = Path(__file__).resolve().parents[2] / "docs"


def _documented() -> dict[str, list[str]]:
    """The presets each doc lists: the grading table's rows, the API reference's ``:::`` entries."""
    table = (DOCS / "concepts" / "grading.md").read_text(encoding="utf-8")
    api = (DOCS / "api" / "presets.md").read_text(encoding="utf-8")
    return {
        "docs/concepts/grading.md": re.findall(r"^\| `(\w+JudgerConfig)` \|", table, re.M),
        "docs/api/presets.md": re.findall(r"^::: judger\.(?:[\w.]+\.)?(\w+JudgerConfig)$", api, re.M),
    }


def test_every_preset_module_class_is_found() -> None:
    # the registry is the preset modules; what the docs list must be exactly what it finds
    for doc, names in _documented().items():
        assert sorted(names) == presets.__all__, f"{doc} lists {names}"
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


def test_a_new_preset_module_is_exported_by_judger_with_no_other_edit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from judger.presets.gsm8k import GSM8KJudgerConfig

    module = types.ModuleType("judger.presets.letter_for_test")
    letter = type("LetterJudgerConfig", (GSM8KJudgerConfig,), {"__module__": module.__name__})
    module.LetterJudgerConfig = letter  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    modules = presets._preset_modules()
    monkeypatch.setattr(presets, "_preset_modules", lambda: sorted([*modules, "letter_for_test"]))
    try:
        assert judger.LetterJudgerConfig is letter  # type: ignore[attr-defined]
        assert "LetterJudgerConfig" in judger.__all__ and "LetterJudgerConfig" in presets.__all__
        assert presets.lookup("letter") is letter
    finally:
        presets._found.pop("LetterJudgerConfig", None)
        presets._loaded.discard("letter_for_test")
        vars(presets).pop("LetterJudgerConfig", None)
        vars(judger).pop("LetterJudgerConfig", None)
