"""CascadeJudger: a rule judger first, the LLM verifier only where the rule did not accept."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from judger import CompassVerifierV2Config, JudgerConfig, RolloutState, Status
from judger.testing.fake_openai import FakeOpenAI
from judger.verifiers import CascadeJudgerConfig

pytestmark = pytest.mark.py310

Fake = tuple[FakeOpenAI, str]


def boxed_exact(response: str, label: Any, extra_info: dict[str, Any]) -> dict[str, Any]:
    """A strict rule: the last \\boxed{} must equal the label as a string."""
    if "EXPLODE" in response:
        raise RuntimeError("rule crashed")
    found = re.findall(r"\\boxed\{([^{}]*)\}", response)
    pred = found[-1] if found else None
    acc = pred == str(label)
    return {"score": 1.0 if acc else 0.0, "acc": acc, "pred": pred}


def _cascade(url: str, **kw: Any) -> CascadeJudgerConfig:
    return CascadeJudgerConfig(
        rule=JudgerConfig(judger_name="boxed_rule", reward_handler=boxed_exact),
        verifier=CompassVerifierV2Config(hosts=[url], retry_backoff=0.01),
        **kw,
    )


async def test_cascade_decisions(fake_grader: Fake, make_state: Callable[..., RolloutState]) -> None:
    fake, url = fake_grader
    states = [
        make_state("so \\boxed{5}", "5"),  # the rule accepts: no LLM call
        make_state("so \\boxed{5.0}", "5"),  # the rule rejects, the verifier accepts
        make_state("the answer is 5", "5"),  # the rule extracts nothing, the verifier accepts
        make_state("so \\boxed{7}", "5"),  # both reject
    ]
    async with _cascade(url).build() as judger:
        a, b, c, d = await judger.batch_judge(states)
    assert a.reward == {"score": 1.0, "acc": True, "pred": "5", "verdict": "correct", "decided_by": "rule"}
    assert b.reward is not None and b.reward["decided_by"] == "verifier"
    assert b.reward["score"] == 1.0 and b.reward["verdict"] == "correct"
    assert b.reward["rule"] == {"score": 0.0, "acc": False, "pred": "5.0"}
    assert c.reward is not None and c.reward["decided_by"] == "verifier" and c.reward["acc"] is True
    assert c.reward["rule"]["pred"] is None
    assert d.reward is not None and (d.reward["score"], d.reward["verdict"]) == (-1.0, "incorrect")
    assert fake.chat_requests == 3


async def test_cascade_single_judge_and_rule_failure(
    fake_grader: Fake, make_state: Callable[..., RolloutState]
) -> None:
    fake, url = fake_grader
    async with _cascade(url).build() as judger:
        state = await judger.judge(make_state("EXPLODE \\boxed{5}", "5"))
    assert (
        state.reward is not None and state.reward["decided_by"] == "verifier" and state.reward["acc"] is True
    )
    assert "rule crashed" in state.reward["rule"]["failure"]
    async with _cascade(url, on_rule_failure="fail").build() as judger:
        state = await judger.judge(make_state("EXPLODE \\boxed{5}", "5"))
    assert state.status is Status.FAILED and "rule crashed" in (state.error_msg or "")
    assert state.extra_fields["judge_failure"]["judger"] == "boxed_rule"
    assert fake.chat_requests == 1


async def test_verifier_failure_fails_only_escalated_samples(
    fake_grader: Fake, make_state: Callable[..., RolloutState]
) -> None:
    fake, url = fake_grader
    fake.mode = "garbage"
    async with _cascade(url).build() as judger:
        ok, failed = await judger.batch_judge([make_state("\\boxed{5}", "5"), make_state("\\boxed{6}", "5")])
    assert ok.reward is not None and ok.reward["decided_by"] == "rule"
    assert failed.status is Status.FAILED and failed.reward is None
    assert failed.extra_fields["judge_failure"]["judger"] == "compass_verifier_v2"
    assert (failed.error_msg or "").startswith("VerdictParseError")


def test_cascade_timeout_covers_both_stages() -> None:
    cfg = CascadeJudgerConfig(
        rule=JudgerConfig(judger_name="r", reward_handler=boxed_exact, timeout=5),
        verifier=CompassVerifierV2Config(hosts=["h:1"], timeout=20),
    )
    judger = cfg.build()
    assert judger.timeout == 25
    judger.close()
