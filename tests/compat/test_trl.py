"""judger.compat.trl, called with exactly the arguments TRL's GRPOTrainer passes
(tests/clients runs it inside a real GRPOTrainer)."""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any

import pytest

from judger import JudgerConfig
from judger.compat.trl import AsyncJudgerReward, JudgerReward, completion_text, judger_reward

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]


class Log:
    def __init__(self) -> None:
        self.metrics: dict[str, list[float]] = {}
        self.extra: dict[str, list[Any]] = {}

    def metric(self, name: str, value: float) -> None:
        self.metrics.setdefault(name, []).append(value)

    def column(self, name: str, values: list[Any]) -> None:
        self.extra.setdefault(name, []).extend(values)


def trl_call(fn: Any, completions: list[Any], log: Log, **columns: Any) -> list[float]:
    """What GRPOTrainer._calculate_rewards passes: prompts, completions, completion_ids, columns, hooks."""
    n = len(completions)
    kwargs = dict(
        prompts=["q"] * n,
        completions=completions,
        completion_ids=[[1, 2]] * n,
        trainer_state=object(),
        log_extra=log.column,
        log_metric=log.metric,
        **columns,
    )
    out = fn(**kwargs)
    return asyncio.run(out) if inspect.isawaitable(out) else out


def test_string_completions_verl_layout_labels_and_metrics() -> None:
    log = Log()
    fn = judger_reward("gsm8k", failure_reward=-0.5, name="judger")
    assert isinstance(fn, AsyncJudgerReward) and inspect.iscoroutinefunction(fn.__call__)
    rewards = trl_call(
        fn,
        ["#### 7", "#### 8", "#### 3"],
        log,
        reward_model=[{"ground_truth": "7"}, {"ground_truth": "7"}, {"ground_truth": None}],
    )
    assert rewards == [1.0, 0.0, -0.5]
    assert log.metrics == {"judger/acc": [0.5], "judger/failed": [1 / 3], "judger/failures": [1.0]}
    assert log.extra["judger_pred"] == ["7", "8", None]
    assert log.extra["judger_failure"][:2] == [None, None] and "None" in log.extra["judger_failure"][2]


def test_chat_completions_and_plain_label_columns() -> None:
    chat = [
        [
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "so "}, {"type": "text", "text": "#### 4"}],
            }
        ]
    ]
    fn = judger_reward("gsm8k", failure_reward=0.0, asynchronous=False)
    assert isinstance(fn, JudgerReward) and not inspect.iscoroutinefunction(fn.__call__)
    assert trl_call(fn, chat, Log(), ground_truth=["4"]) == [1.0]
    assert trl_call(fn, ["#### 4"], Log(), solution=["4"]) == [1.0]
    custom = judger_reward("gsm8k", failure_reward=0.0, label_key="meta.answer")
    assert trl_call(custom, ["#### 9"], Log(), meta=[{"answer": "9"}]) == [1.0]
    assert completion_text([{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]) == "y"


def test_missing_label_column_names_the_fix() -> None:
    fn = judger_reward("gsm8k", failure_reward=0.0)
    with pytest.raises(KeyError, match="label_key"):
        trl_call(fn, ["#### 4"], Log(), answer=["4"])


@pytest.mark.parametrize("bad", [None, float("nan"), float("inf"), "0", True])
def test_failure_reward_must_be_a_finite_number(bad: Any) -> None:
    with pytest.raises((TypeError, ValueError), match="failure_reward"):
        judger_reward("gsm8k", failure_reward=bad)


def test_sources_config_judger_preset_router(caplog: pytest.LogCaptureFixture) -> None:
    def handler(response: str, label: Any, extra_info: Any) -> dict[str, Any]:
        if label == "boom":
            raise RuntimeError("scorer exploded")
        return {"score": float(response == label), "acc": response == label}

    config = JudgerConfig(judger_name="eq", reward_handler=handler)
    for source in (config, config.build()):
        fn = judger_reward(source, failure_reward=-1.0)
        caplog.clear()  # each source must log its own failure, not pass on the previous one's record
        with caplog.at_level(logging.WARNING, logger="judger.compat.trl"):
            assert trl_call(fn, ["a", "b"], Log(), ground_truth=["a", "boom"]) == [1.0, -1.0]
        # the judger's message reaches the user, on the TRL adapter's logger
        assert any(
            r.name == "judger.compat.trl" and "scorer exploded" in r.getMessage() for r in caplog.records
        )
    router = judger_reward("verl", failure_reward=0.0)
    assert trl_call(router, ["#### 2"], Log(), data_source=["openai/gsm8k"], ground_truth=["2"]) == [1.0]
    assert trl_call(
        judger_reward("MathJudgerConfig", failure_reward=0.0), ["\\boxed{50}"], Log(), ground_truth=["50\\%"]
    ) == [1.0]
    remote = judger_reward("http://127.0.0.1:9/reward", failure_reward=0.0)  # built only, no traffic
    assert remote.judger.judger_name == "remote"
    with pytest.raises(ValueError, match="unknown preset 'nope'"):
        judger_reward("nope", failure_reward=0.0)
