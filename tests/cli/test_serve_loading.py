"""How `judger serve` finds what to serve: files, modules, presets, overrides."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from judger import JudgerConfig
from judger.presets.loading import load_preset, load_target, parse_overrides

pytestmark = pytest.mark.py310

CONFIG_FILE = """
from judger import JudgerConfig

def exact(response, label, extra_info):
    return {"score": float(response == label)}

judger_config = JudgerConfig(judger_name="from_file", reward_handler=exact)
other = JudgerConfig(judger_name="other", reward_handler=exact)
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_file_default_named_and_overrides(tmp_path: Path) -> None:
    path = _write(tmp_path, "my_judger.py", CONFIG_FILE)
    cfg = load_target(str(path))
    assert isinstance(cfg, JudgerConfig) and cfg.judger_name == "from_file"
    assert load_target(f"{path}:other").judger_name == "other"  # type: ignore[union-attr]
    tuned = load_target(str(path), {"timeout": 5, "judger_name": "tuned"})
    assert (tuned.timeout, tuned.judger_name) == (5.0, "tuned")  # type: ignore[union-attr]
    assert cfg.timeout != 5.0  # the module's object is left as it was
    with pytest.raises(ValueError, match="timeout"):
        load_target(str(path), {"timeout": -1})
    with pytest.raises(ValueError, match="no attribute 'missing'"):
        load_target(f"{path}:missing")


def test_file_with_several_configs_needs_a_name(tmp_path: Path) -> None:
    text = CONFIG_FILE.replace("judger_config =", "first =")
    path = _write(tmp_path, "several.py", text)
    with pytest.raises(ValueError, match="several judger configs"):
        load_target(str(path))
    with pytest.raises(ValueError, match="does not exist"):
        load_target(str(tmp_path / "nope.py"))


def test_module_path_and_factories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (
        CONFIG_FILE
        + "\ndef make(name='made'):\n    return JudgerConfig(judger_name=name, reward_handler=exact)\n"
    )
    _write(tmp_path, "serve_mod_cfg.py", text)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "serve_mod_cfg", raising=False)
    assert load_target("serve_mod_cfg:other").judger_name == "other"  # type: ignore[union-attr]
    assert load_target("serve_mod_cfg").judger_name == "from_file"  # type: ignore[union-attr]
    assert load_target("serve_mod_cfg:make", {"name": "x"}).judger_name == "x"  # type: ignore[union-attr]
    assert (
        load_target(
            "judger.judgers.config:JudgerConfig", {"judger_name": "n", "reward_handler": "m:f"}
        ).judger_name
        == "n"
    )  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="neither"):
        load_target("no_such_module_here")


def test_parse_overrides() -> None:
    assert parse_overrides(["timeout=5", "name=gsm8k", 'hosts=["a:1"]']) == {
        "timeout": 5,
        "name": "gsm8k",
        "hosts": ["a:1"],
    }
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_overrides(["oops"])


def test_preset_resolves_lazily() -> None:
    with pytest.raises(ValueError, match="unknown preset 'NoSuchJudgerConfig'"):
        load_preset("NoSuchJudgerConfig")
    cfg = load_preset("GSM8KJudgerConfig")
    assert isinstance(cfg, JudgerConfig)
