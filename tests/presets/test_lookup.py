"""One preset lookup: a class name or a short name, in any case; a misspelled name gets one message
-- with the closest preset and every known one -- from the CLI, the server and TRL alike."""

from __future__ import annotations

from typing import Any

import pytest

import judger.presets as presets
from judger.cli.main import main
from judger.compat.trl import judger_reward
from judger.core.errors import ConfigError
from judger.presets.loading import load_preset

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("gsm8k", "GSM8KJudgerConfig"),
        ("GSM8K", "GSM8KJudgerConfig"),
        ("math", "MathJudgerConfig"),
        ("MathVerifyJudgerConfig", "MathVerifyJudgerConfig"),
        ("mathverify", "MathVerifyJudgerConfig"),
        ("dapomath", "DapoMathJudgerConfig"),
        (" qaexactmatch ", "QAExactMatchJudgerConfig"),
    ],
)
def test_lookup_by_class_or_short_name(name: str, expected: str) -> None:
    assert presets.lookup(name).__name__ == expected


def test_a_misspelled_name_says_the_closest_and_every_preset() -> None:
    with pytest.raises(ConfigError) as caught:
        presets.lookup("gsm8")
    message = str(caught.value)
    assert message.startswith("unknown preset 'gsm8' (did you mean 'gsm8k'?); known presets: ")
    for name in presets.preset_names():
        assert f"{presets.short_name(name)} ({name})" in message
    assert "did you mean" not in presets.unknown_preset_message("zzzzzz")


def test_every_entry_point_gives_the_same_message(
    write_jsonl: Any, row: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = presets.unknown_preset_message("mth")
    assert "(did you mean 'math'?)" in expected
    with pytest.raises(ConfigError) as from_loading:  # judger serve --preset loads through here
        load_preset("mth")
    with pytest.raises(ValueError) as from_trl:
        judger_reward("mth", failure_reward=0.0)
    assert str(from_loading.value) == str(from_trl.value) == expected
    rows = str(write_jsonl([row("#### 1", "1")]))
    assert main(["score", "--preset", "mth", "--no-progress", rows]) == 2
    assert expected in capsys.readouterr().err
    assert main(["serve", "--preset", "mth"]) == 2
    assert expected in capsys.readouterr().err
