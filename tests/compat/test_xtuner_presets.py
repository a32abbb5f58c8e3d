"""Preset configs honour XTuner's options (extra_info, reward_handler) or refuse them."""

from __future__ import annotations

from typing import Any

import pytest

from judger import RolloutState
from judger.presets import DapoMathJudgerConfig, GEO3KJudgerConfig, GSM8KJudgerConfig, MathJudgerConfig

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]


def state(response: str, label: str = "72", **kw: Any) -> RolloutState:
    return RolloutState(message=[], response=response, reward_model={"ground_truth": label}, **kw)


async def score(cfg: Any, response: str, label: str = "72", **kw: Any) -> Any:
    judged = await cfg.build().judge(state(response, label, **kw))
    assert judged.reward is not None, judged.error_msg
    return judged.reward["score"]


async def test_gsm8k_extra_info_has_xtuners_meaning() -> None:
    # XTuner's GSM8K handler reads extra_info["score"] and ["format_score"]
    assert await score(GSM8KJudgerConfig(extra_info={"format_score": 0.1}), "#### 71") == pytest.approx(0.1)
    assert await score(GSM8KJudgerConfig(extra_info={"score": 2, "format_score": 0.1}), "#### 72") == 2.0
    assert await score(GSM8KJudgerConfig(extra_info={"format_score": 0.1}), "no answer") == 0.0
    cfg = GSM8KJudgerConfig(extra_info={"score": 2})
    assert (cfg.score, cfg.format_score, cfg.extra_info) == (2.0, 0.0, {})


async def test_gsm8k_reward_handler_is_used_with_xtuners_extra_info() -> None:
    seen: list[dict[str, Any]] = []

    def handler(response: str, label: str, extra_info: dict) -> dict:
        seen.append({"response": response, "label": label, "extra_info": extra_info})
        return {"score": 0.5}

    cfg = GSM8KJudgerConfig(reward_handler=handler, extra_info={"format_score": 0.2, "mine": 1})
    assert await score(cfg, "#### 72") == 0.5
    assert seen == [
        {"response": "#### 72", "label": "72", "extra_info": {"score": 1.0, "format_score": 0.2, "mine": 1}}
    ]


async def test_geo3k_extra_info_has_xtuners_meaning() -> None:
    cfg = GEO3KJudgerConfig(extra_info={"format_score": 0.5, "use_boxed": True})
    assert (cfg.format_score, cfg.use_boxed, cfg.extra_info) == (0.5, True, {})
    # right answer, no <think> format: (1 - format_score) * acc
    assert await score(cfg, "\\boxed{3}", "3") == pytest.approx(0.5)
    assert await score(GEO3KJudgerConfig(), "\\boxed{3}", "3") == pytest.approx(0.9)


async def test_dapo_xtuner_fields() -> None:
    # a list of eos tokens: the first one the response ends with is stripped, as XTuner does
    cfg = DapoMathJudgerConfig(eos_token=["</s>", "<|im_end|>"], compat="verl")
    assert await score(cfg, "Answer: 72<|im_end|>") == 1.0
    # extra_info carries DAPO's options too
    cfg = DapoMathJudgerConfig(extra_info={"eos_token": "<|im_end|>"}, compat="verl")
    assert cfg.eos_token == "<|im_end|>" and await score(cfg, "Answer: 72<|im_end|>") == 1.0
    # XTuner's defaults are accepted; values its scorer would never read are refused
    DapoMathJudgerConfig(score=1, format_score=0)
    with pytest.raises(ValueError, match="score=2.0.*would not be honoured"):
        DapoMathJudgerConfig(score=2)


async def test_dapo_tokenizer_counts_tokens_as_xtuner_does() -> None:
    def words(text: str) -> dict[str, list[int]]:  # any callable tokenizer(text)["input_ids"]
        return {"input_ids": list(range(len(text.split())))}

    cfg = DapoMathJudgerConfig(
        compat="verl",
        enable_overlong_buffer=True,
        max_response_len=10,
        overlong_buffer_len=4,
        overlong_penalty_factor=1.0,
        tokenizer=words,
    )
    # 8 words, no response_ids: exceed = 8 - (10 - 4) = 2 -> penalty -0.5
    assert await score(cfg, "a b c d e f Answer: 72") == pytest.approx(0.5)
    with pytest.raises(ValueError, match="tokenizer is used only"):
        DapoMathJudgerConfig(tokenizer=words)


def test_options_that_would_be_ignored_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"extra_info keys \['foo'\] are not read"):
        GSM8KJudgerConfig(extra_info={"foo": 1})
    with pytest.raises(ValueError, match="given both as a field"):
        GSM8KJudgerConfig(format_score=0.3, extra_info={"format_score": 0.1})
    with pytest.raises(ValueError, match="batched is an option of a reward_handler"):
        GSM8KJudgerConfig(batched=True)
    with pytest.raises(ValueError, match=r"\['method'\] configure the built-in scorer"):
        GSM8KJudgerConfig(reward_handler=lambda **kw: {"score": 1.0}, method="flexible")
    with pytest.raises(ValueError, match="compat"):
        GSM8KJudgerConfig(reward_handler=lambda **kw: {"score": 1.0}, compat="verl")
    with pytest.raises(ValueError, match="always scores with its own scorer"):
        MathJudgerConfig(reward_handler=lambda **kw: {"score": 1.0})
    with pytest.raises(ValueError, match="extra_info keys"):
        MathJudgerConfig(extra_info={"format_score": 0.1})


def test_llm_verifier_refuses_handler_options() -> None:
    from judger import CompassVerifierV2Config

    CompassVerifierV2Config(hosts=["127.0.0.1:1"], request_timeout=5)
    with pytest.raises(
        ValueError, match=r"\['reward_handler', 'extra_info'\] are options of a reward_handler"
    ):
        CompassVerifierV2Config(hosts=["127.0.0.1:1"], reward_handler=lambda **kw: {}, extra_info={"a": 1})
