"""Every option a preset's config passes its scorer must be a keyword the scorer takes: ``compat``
above all, which ScorerJudgerConfig passes to every preset's scorer. The build refuses a scorer
that lacks one, naming it, where each sample would otherwise fail with a TypeError."""

from __future__ import annotations

from typing import Any

import pytest

import judger.presets as presets
from judger.core.errors import ConfigError
from judger.presets.base import ScorerFn, ScorerJudgerConfig

pytestmark = pytest.mark.py310


def letter_only(solution_str: str, ground_truth: Any, extra_info: Any = None) -> dict[str, Any]:
    return {"score": float(solution_str.strip()[-1:] == ground_truth)}


def letter_any(
    solution_str: str, ground_truth: Any, extra_info: Any = None, **options: Any
) -> dict[str, Any]:
    return letter_only(solution_str, ground_truth)


class _LetterJudgerConfig(ScorerJudgerConfig):
    judger_name: str = "letter"

    def scorer(self) -> ScorerFn:
        return letter_only


class _AnyJudgerConfig(_LetterJudgerConfig):
    def scorer(self) -> ScorerFn:
        return letter_any


def test_a_scorer_without_compat_is_refused_at_build_naming_it() -> None:
    with pytest.raises(ConfigError) as caught:
        _LetterJudgerConfig().build()
    message = str(caught.value)
    assert "letter_only() takes no 'compat' keyword" in message
    assert "ScorerJudgerConfig.scorer_options passes compat to every preset" in message


def test_an_option_a_preset_adds_is_checked_too() -> None:
    class Options(_LetterJudgerConfig):
        def scorer_options(self) -> dict[str, Any]:
            return {"strict": True}

    with pytest.raises(ConfigError, match=r"letter_only\(\) takes no 'strict' keyword"):
        Options().build()


async def test_a_scorer_taking_any_keyword_builds_and_scores() -> None:
    from judger import RolloutState

    state = RolloutState(response="answer: B", reward_model={"ground_truth": "B"})
    [judged] = await _AnyJudgerConfig().build().batch_judge([state])
    assert judged.reward is not None and judged.reward["score"] == 1.0


@pytest.mark.parametrize("name", presets.preset_names())
@pytest.mark.parametrize("compat", [None, "verl"])
def test_every_preset_builds(name: str, compat: str | None) -> None:
    assert getattr(presets, name)(compat=compat).build() is not None
