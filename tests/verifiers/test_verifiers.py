"""LLM verifiers against fake OpenAI-compatible graders on 127.0.0.1."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from judger import CompassVerifierV2Config, RolloutState, Status
from judger.core.errors import JudgerError
from judger.testing.fake_openai import FakeOpenAI
from judger.testing.servers import free_port
from judger.verifiers import ChatHosts, LLMJudgerConfig, normalize_host

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

Fake = tuple[FakeOpenAI, str]


def _config(*hosts: str, **kw: object) -> CompassVerifierV2Config:
    return CompassVerifierV2Config(hosts=list(hosts), retry_backoff=0.01, **kw)  # type: ignore[arg-type]


async def test_verdicts_map_to_scores(fake_grader: Fake, make_state: Callable[..., RolloutState]) -> None:
    fake, url = fake_grader
    states = [
        make_state("Adding them gives \\boxed{5}", "5"),
        make_state("I think it is \\boxed{6}", "5"),
        make_state("let me think for a long time </think>", "5"),  # nothing after thinking
    ]
    async with _config(url, invalid_score=0.0).build() as judger:
        judged = await judger.batch_judge(states)
    rewards = [s.reward for s in judged]
    assert rewards[0] == {"score": 1.0, "acc": True, "verdict": "correct", "judge_reply": "A"}
    assert rewards[1] == {"score": -1.0, "acc": False, "verdict": "incorrect", "judge_reply": "B"}
    assert rewards[2] == {"score": 0.0, "acc": False, "verdict": "invalid", "judge_reply": "C"}
    assert fake.chat_requests == 3
    sent = fake.requests[0]
    assert sent["model"] == "fake-grader" and sent["temperature"] == 0.0 and sent["max_tokens"] == 1
    assert "What is 2 + 3?" in sent["messages"][-1]["content"]


async def test_invalid_scores_minus_one_by_default(
    fake_grader: Fake, make_state: Callable[..., RolloutState]
) -> None:
    _, url = fake_grader
    async with _config(url).build() as judger:
        state = await judger.judge(make_state("", "5"))
    assert state.reward == {"score": -1.0, "acc": False, "verdict": "invalid", "judge_reply": "C"}


async def test_incomplete_samples_are_not_sent(
    fake_grader: Fake, make_state: Callable[..., RolloutState]
) -> None:
    fake, url = fake_grader
    async with _config(url).build() as judger:
        aborted, no_response = await judger.batch_judge(
            [make_state("\\boxed{5}", "5", status=Status.ABORTED), make_state(None, "5")]
        )
    assert aborted.reward == {
        "score": -1.0,
        "acc": False,
        "verdict": "skipped",
        "judge_reply": None,
        "skip_reason": "status is aborted, not completed",
    }
    assert fake.chat_requests == 0 and fake.models_requests == 0
    # a completed sample with no response is not a wrong answer: it fails, as the rule presets fail it
    assert no_response.status == Status.FAILED and "nothing to judge" in (no_response.error_msg or "")


async def test_a_null_response_fails_as_the_rule_presets_fail_it(
    fake_grader: Fake, make_state: Callable[..., RolloutState]
) -> None:
    from judger.presets import MathJudgerConfig

    _, url = fake_grader
    async with _config(url).build() as judger:
        [graded] = await judger.batch_judge([make_state(None, "5")])
    [ruled] = await MathJudgerConfig().build().batch_judge([make_state(None, "5")])
    assert graded.status == ruled.status == Status.FAILED
    assert graded.reward == ruled.reward
    assert graded.error_msg is not None and ruled.error_msg is not None
    assert graded.error_msg.split(": ", 1)[1] == ruled.error_msg.split(": ", 1)[1]


async def test_a_state_at_the_default_status_is_graded_as_the_rule_presets_judge_it(
    fake_grader: Fake, make_state: Callable[..., RolloutState]
) -> None:
    """A RolloutState built by hand keeps status INIT: the rule presets judge it, so must the grader."""
    from judger.presets import MathJudgerConfig

    fake, url = fake_grader
    by_hand = RolloutState(
        message=[{"role": "user", "content": "What is 2 + 3?"}],
        response="\\boxed{5}",
        reward_model={"ground_truth": "5"},
    )
    assert by_hand.status == Status.INIT
    async with _config(url).build() as judger:
        graded = await judger.judge(by_hand.model_copy(deep=True))
    async with MathJudgerConfig().build() as rule:
        ruled = await rule.judge(by_hand.model_copy(deep=True))
    assert ruled.reward is not None and ruled.reward["score"] == 1.0
    assert graded.reward == {"score": 1.0, "acc": True, "verdict": "correct", "judge_reply": "A"}
    assert fake.chat_requests == 1


async def test_unparseable_reply_is_a_judge_failure(
    fake_grader: Fake, make_state: Callable[..., RolloutState]
) -> None:
    fake, url = fake_grader
    fake.mode = "garbage"
    async with _config(url).build() as judger:
        state = await judger.judge(make_state("\\boxed{5}", "5"))
    assert state.status is Status.FAILED and state.reward is None
    assert state.error_msg is not None and state.error_msg.startswith("VerdictParseError")
    assert "not sure" in state.error_msg
    assert state.extra_fields["judge_failure"] == {"judger": "compass_verifier_v2", "kind": "error"}
    async with _config(url, on_error="raise").build() as judger:
        with pytest.raises(JudgerError, match="no verdict"):
            await judger.judge(make_state("\\boxed{5}", "5"))


async def test_long_response_is_cut_before_grading(
    fake_grader: Fake, make_state: Callable[..., RolloutState]
) -> None:
    fake, url = fake_grader
    body = "\n".join(f"step {i}: \\boxed{{{i}}}" for i in range(100))
    response = "<think>" + "hmm " * 5000 + "</think>" + body + "<|im_end|>"
    async with _config(url).build() as judger:
        state = await judger.judge(make_state(response, "99"))
    assert state.reward is not None and state.reward["verdict"] == "correct"
    prompt = fake.requests[-1]["messages"][-1]["content"]
    assert "hmm" not in prompt and "<|im_end|>" not in prompt
    assert "step 89:" not in prompt and "step 90:" in prompt and "step 99:" in prompt


async def test_model_is_discovered_lazily_once(
    fake_grader: Fake, make_state: Callable[..., RolloutState]
) -> None:
    fake, url = fake_grader
    # building touches no network: a host nobody listens on is fine until the first judge call
    await _config(f"127.0.0.1:{free_port()}").build().aclose()
    async with _config(url).build() as judger:
        judged = await judger.batch_judge([make_state(f"\\boxed{{{i}}}", "3") for i in range(20)])
    assert [s.reward["acc"] for s in judged if s.reward] == [i == 3 for i in range(20)]
    assert fake.models_requests == 1
    fake.model = "reloaded-model"  # the server now serves another model: 404, look it up again
    async with _config(url).build() as judger:
        judger.pool.hosts[0].model = "fake-grader"
        state = await judger.judge(make_state("\\boxed{3}", "3"))
    assert state.reward is not None and state.reward["acc"] is True
    assert fake.requests[-1]["model"] == "reloaded-model"


async def test_failover_to_healthy_host(
    two_graders: list[Fake], make_state: Callable[..., RolloutState]
) -> None:
    (bad, bad_url), (good, good_url) = two_graders
    bad.mode = "error500"
    async with _config(bad_url, good_url).build() as judger:
        judged = await judger.batch_judge([make_state(f"\\boxed{{{i}}}", "1") for i in range(40)])
        first_wave = bad.chat_requests
        # the bad host now cools down: the next batch goes to the good host only
        again = await judger.batch_judge([make_state(f"\\boxed{{{i}}}", "1") for i in range(100, 120)])
        stats = judger.pool.stats()
    assert all(s.status is not Status.FAILED for s in judged + again)
    assert [s.reward["acc"] for s in judged if s.reward] == [i == 1 for i in range(40)]
    assert first_wave >= 1 and good.chat_requests == 60
    assert bad.chat_requests == first_wave
    assert stats[normalize_host(bad_url)]["errors"] == bad.chat_requests


async def test_retries_then_success_or_failure(
    fake_grader: Fake, make_state: Callable[..., RolloutState]
) -> None:
    fake, url = fake_grader
    fake.fail_first, fake.fail_status = 2, 503
    async with _config(url, max_retries=2).build() as judger:
        state = await judger.judge(make_state("\\boxed{5}", "5"))
    assert state.reward is not None and state.reward["acc"] is True and fake.chat_requests == 3
    fake.reset()
    fake.mode = "error503"
    async with _config(url, max_retries=1).build() as judger:
        state = await judger.judge(make_state("\\boxed{5}", "5"))
    assert state.status is Status.FAILED and fake.chat_requests == 2
    assert state.error_msg is not None and "after 2 attempts" in state.error_msg and url in state.error_msg


async def test_non_retryable_status_is_not_retried(
    fake_grader: Fake, make_state: Callable[..., RolloutState]
) -> None:
    fake, url = fake_grader
    fake.fail_first, fake.fail_status = 1, 400
    async with _config(url, max_retries=3).build() as judger:
        state = await judger.judge(make_state("\\boxed{5}", "5"))
    assert state.status is Status.FAILED and "not retried" in (state.error_msg or "")
    assert fake.chat_requests == 1


async def test_concurrency_is_bounded(fake_grader: Fake, make_state: Callable[..., RolloutState]) -> None:
    fake, url = fake_grader
    fake.delay = 0.05
    async with _config(url, max_concurrency=4).build() as judger:
        judged = await judger.batch_judge([make_state(f"\\boxed{{{i}}}", "5") for i in range(24)])
    assert [s.reward["acc"] for s in judged if s.reward] == [i == 5 for i in range(24)]
    assert 2 <= fake.max_in_flight <= 4 and fake.chat_requests == 24


async def test_identical_prompts_share_one_request(
    fake_grader: Fake, make_state: Callable[..., RolloutState]
) -> None:
    fake, url = fake_grader
    # a GRPO group: 8 samples, 3 distinct final answers once cut (the reasoning before </think> goes)
    group = [make_state(f"<think>try {i}</think>\\boxed{{{i % 3}}}", "1") for i in range(8)]
    group.append(make_state("\\boxed{1}", "1", status=Status.ABORTED))
    async with _config(url).build() as judger:
        judged = await judger.batch_judge(group)
    assert fake.chat_requests == 3
    assert [s.reward["verdict"] for s in judged if s.reward] == [
        *["correct" if i % 3 == 1 else "incorrect" for i in range(8)],
        "skipped",
    ]
    assert judged[1].reward is not judged[4].reward  # equal, but each sample owns its dict
    fake.reset()
    async with _config(url, dedup=False).build() as judger:
        await judger.batch_judge(group[:8])
    assert fake.chat_requests == 8


async def test_stalled_host_times_out_and_fails_over(
    two_graders: list[Fake], make_state: Callable[..., RolloutState]
) -> None:
    (stalled, stalled_url), (good, good_url) = two_graders
    stalled.mode = "stall"
    async with _config(stalled_url, request_timeout=1.0, timeout=10).build() as judger:
        t0 = time.monotonic()
        state = await judger.judge(make_state("\\boxed{5}", "5"))
        assert time.monotonic() - t0 < 5 * 1.2  # normally the 1 s request timeout; the stall: 10 s
    assert state.status is Status.FAILED and state.extra_fields["judge_failure"]["kind"] == "timeout"
    async with _config(stalled_url, good_url, request_timeout=1.0).build() as judger:
        judger.pool.hosts[1].in_flight = 1  # make the stalled host the first choice
        state = await judger.judge(make_state("\\boxed{5}", "5"))
    assert state.reward is not None and state.reward["acc"] is True and good.chat_requests == 1


async def test_generic_llm_judger_template_and_parsers(
    fake_grader: Fake, make_state: Callable[..., RolloutState]
) -> None:
    fake, url = fake_grader
    fake.reply_style = "cot"
    template = (
        "Grade it.\n<Gold Target Begin>:\n{label}\n<Gold Target End>\n"
        "<Predicted Answer Begin>:\n{response}\n<Predicted End>"
    )
    cfg = LLMJudgerConfig(
        hosts=[url],
        prompt_template=template,
        system_prompt="You are strict.",
        verdict_pattern=r"\\boxed\{([ABC])\}",
        verdict_scores={"A": 1.0, "B": 0.0, "C": -0.5},
        max_tokens=64,
        retry_backoff=0.01,
    )
    async with cfg.build() as judger:
        right, wrong, empty = await judger.batch_judge(
            [make_state("\\boxed{5}", "5"), make_state("\\boxed{4}", "5"), make_state(" ", "5")]
        )
    assert [s.reward["score"] for s in (right, wrong, empty) if s.reward] == [1.0, 0.0, -0.5]
    assert [s.reward["verdict"] for s in (right, wrong, empty) if s.reward] == [
        "correct",
        "incorrect",
        "invalid",
    ]
    sent = fake.requests[0]["messages"]
    assert sent[0] == {"role": "system", "content": "You are strict."} and sent[1]["content"].startswith(
        "Grade it."
    )

    def yes_no(reply: str) -> str | None:
        return "yes" if "boxed{A}" in reply else "no" if "boxed{B}" in reply else None

    cfg2 = LLMJudgerConfig(
        hosts=[url],
        verdict_parser=yes_no,
        verdict_scores={"yes": 1.0, "no": 0.0},
        verdict_names={"yes": "correct", "no": "incorrect"},
        correct_verdicts=["yes"],
    )
    async with cfg2.build() as judger:
        right, empty = await judger.batch_judge([make_state("\\boxed{5}", "5"), make_state("", "5")])
    assert right.reward == {
        "score": 1.0,
        "acc": True,
        "verdict": "correct",
        "judge_reply": right.reward["judge_reply"],
    }
    assert empty.status is Status.FAILED  # "C" has no score in this parser's world: a failure


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="hosts"):
        CompassVerifierV2Config(hosts=[])
    with pytest.raises(ValueError, match="response"):
        LLMJudgerConfig(hosts=["h:1"], prompt_template="no placeholder")
    with pytest.raises(ValueError, match="not both"):
        LLMJudgerConfig(hosts=["h:1"], verdict_pattern="A", verdict_parser=lambda r: r).build()
    assert normalize_host("10.0.0.5:8000") == "http://10.0.0.5:8000"
    assert normalize_host("https://h/v1/") == "https://h"


async def test_pool_prefers_least_loaded_healthy_host() -> None:
    pool = ChatHosts(["a:1", "b:1", "c:1"])
    a, b, c = pool.hosts
    a.in_flight, b.in_flight, c.in_flight = 3, 1, 2
    assert pool.pick(set()) is b
    b.down_until = time.monotonic() + 60
    assert pool.pick(set()) is c
    assert pool.pick({c.url}) is a
    a.down_until = c.down_until = time.monotonic() + 30
    assert pool.pick(set()) in (a, c)  # all cooling down: the one back soonest
    await asyncio.sleep(0)
    await pool.aclose()
