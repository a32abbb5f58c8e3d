"""``JUDGER_CONFIG``: how a trainer adapter without a place for options is told its judger, read by
the same loader as ``judger score -c`` / ``judger serve``."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from judger.compat.source import JudgerSource, resolve_judger
from judger.core.errors import ConfigError
from judger.presets import GSM8KJudgerConfig, MathJudgerConfig

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

CONFIG_FILE = """
from judger import JudgerConfig
exact = JudgerConfig(judger_name="exact", reward_handler="judger.testing.handlers:exact_match")
other = JudgerConfig(judger_name="other", reward_handler="judger.testing.handlers:report_pid")
"""


def judger_name(monkeypatch: pytest.MonkeyPatch, value: str) -> str:
    monkeypatch.setenv("JUDGER_CONFIG", value)
    return JudgerSource().get().judger_name


def test_every_form_of_the_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "my_judgers.py"
    path.write_text(CONFIG_FILE)
    assert judger_name(monkeypatch, "math") == MathJudgerConfig().judger_name
    assert judger_name(monkeypatch, "GSM8KJudgerConfig") == GSM8KJudgerConfig().judger_name
    assert judger_name(monkeypatch, f"{path}:other") == "other"
    assert judger_name(monkeypatch, "judger.compat.verl:default_judger_config") == "verl_default"
    with pytest.raises(ConfigError, match="defines several judger configs"):
        judger_name(monkeypatch, str(path))  # the CLI's own message: the same loader


def test_unset_or_unknown_is_refused_naming_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JUDGER_CONFIG", raising=False)
    with pytest.raises(ConfigError, match=r"\$JUDGER_CONFIG is not set: name the judger .* 'math'"):
        JudgerSource().get()
    with pytest.raises(ConfigError, match="unknown preset 'maths'.*did you mean 'math'"):
        judger_name(monkeypatch, "maths")
    with pytest.raises(ConfigError, match="unknown preset 'maths'"):
        JudgerSource("maths")  # a name given in code: refused when given


def test_copies_share_one_judger_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """AReaL pickles its reward function with every call: each copy must not build a new judger."""
    monkeypatch.setenv("JUDGER_CONFIG", "gsm8k")
    first = JudgerSource()
    copy = pickle.loads(pickle.dumps(first))
    assert copy.get() is first.get()
    config_copy = pickle.loads(pickle.dumps(JudgerSource(GSM8KJudgerConfig(timeout=7))))
    assert config_copy.get() is JudgerSource(GSM8KJudgerConfig(timeout=7)).get()
    assert config_copy.get() is not first.get()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_worker_builds_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """A judger's threads and pools do not survive a fork: a process pool's worker builds its own."""
    monkeypatch.setenv("JUDGER_CONFIG", "gsm8k")
    parent = JudgerSource().get()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: exit at once, reporting whether it got a new judger
        os.write(write, b"1" if JudgerSource().get() is not parent else b"0")
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    assert os.read(read, 1) == b"1"


def test_resolve_judger_takes_what_trl_took() -> None:
    judger = GSM8KJudgerConfig().build()
    assert resolve_judger(judger) is judger
    assert resolve_judger("verl").judger_name == "verl_default"
    assert resolve_judger("http://127.0.0.1:9/reward").judger_name == "remote"
    with pytest.raises(TypeError, match="cannot make a judger from int"):
        resolve_judger(3)
