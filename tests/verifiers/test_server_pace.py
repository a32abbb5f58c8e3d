"""LLM verifiers at the grader's pace: the requests in flight follow what a host answers within the
deadline, so a slow grader's queue never holds a request past it, and a fast one is kept full; and
the grading prompt puts what every sample shares first, where a server's prefix cache serves it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from judger import CompassVerifierV2Config, RolloutState, Status
from judger.testing.fake_openai import FakeOpenAI
from judger.verifiers import LLMJudgerConfig
from judger.verifiers.prompts import QUESTION_BEGIN, RESPONSE_BEGIN

Fake = tuple[FakeOpenAI, str]


def _states(make_state: Callable[..., RolloutState], n: int) -> list[RolloutState]:
    # every response its own: identical grading prompts would share one request
    return [
        make_state(f"So the answer is \\boxed{{{i}}}", "5", question=f"What is {i} + 0?") for i in range(n)
    ]


async def test_a_slow_grader_is_never_sent_more_than_it_answers_in_time(
    fake_grader: Fake, make_state: Callable[..., RolloutState]
) -> None:
    fake, url = fake_grader
    # four requests at a time, 0.2 s each: 64 at once would wait up to 3.2 s in its queue
    fake.capacity, fake.delay = 4, 0.2
    config = CompassVerifierV2Config(hosts=[url], max_concurrency=64, request_timeout=2.0, max_retries=0)
    async with config.build() as judger:
        judged = await judger.batch_judge(_states(make_state, 64))
        limit = judger.pool.stats()[judger.pool.hosts[0].url]["limit"]
    failed = [s.error_msg for s in judged if s.status is Status.FAILED]
    assert failed == []  # no request timed out in the grader's queue
    assert [s.reward["acc"] for s in judged] == [i == 5 for i in range(64)]
    # the grader was kept busy (more in flight than it serves at once), never flooded
    assert 4 < fake.max_in_flight < 64 and 4 <= limit < 64


async def test_a_fast_grader_is_kept_full(fake_grader: Fake, make_state: Callable[..., RolloutState]) -> None:
    fake, url = fake_grader
    fake.delay = 0.2  # answers in 0.2 s, whatever it holds
    config = CompassVerifierV2Config(hosts=[url], max_concurrency=64, request_timeout=10.0)
    async with config.build() as judger:
        judged = await judger.batch_judge(_states(make_state, 400))
    assert all(s.status is Status.COMPLETED for s in judged), {s.error_msg for s in judged}
    # well past the 16 of the start within a few round trips, towards the bound the caller gave
    # (a loaded test machine's own latency may cut it back from 64 near the end)
    assert fake.max_in_flight > 32


async def test_after_timeouts_a_host_is_sent_only_what_it_answers_in_time(
    fake_grader: Fake, make_state: Callable[..., RolloutState]
) -> None:
    fake, url = fake_grader
    fake.capacity, fake.delay = 1, 0.6  # one at a time, 0.6 s each, within a deadline of 1 s
    config = CompassVerifierV2Config(hosts=[url], max_concurrency=16, request_timeout=1.0, max_retries=0)
    async with config.build() as judger:
        first = await judger.batch_judge(_states(make_state, 8))
        limit = judger.pool.stats()[judger.pool.hosts[0].url]["limit"]
        while fake.in_flight:  # vLLM aborts a request whose client left; this fake serves it out
            await asyncio.sleep(0.05)
        fake.reset()
        states = _states(make_state, 16)[8:]
        second = await judger.batch_judge(states)
    # the first burst timed out in the grader's queue, and each timeout halved what the host is sent
    assert any(s.status is Status.FAILED for s in first) and limit == 1
    # from then on one request at a time: every sample of the next batch judged, none timed out
    assert all(s.status is Status.COMPLETED for s in second), [s.error_msg for s in second]
    assert fake.max_in_flight == 1


def test_what_every_sample_shares_comes_first_in_the_grading_prompt() -> None:
    judger = LLMJudgerConfig(hosts=["127.0.0.1:1"]).build_local()

    def prompt(question: str, label: str, response: str) -> str:
        payload = {"question": question, "label": label, "response": response, "status": "completed"}
        (message,) = judger.build_messages(payload)
        return message["content"]

    def shared(a: str, b: str) -> str:
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return a[:n]

    # two prompts of a benchmark: the whole instructions, up to the question's section
    one, other = prompt("What is 2 + 3?", "5", "\\boxed{5}"), prompt("Name a prime.", "7", "\\boxed{7}")
    assert shared(one, other).rstrip().endswith(QUESTION_BEGIN) and len(shared(one, other)) > 900
    # two samples of one prompt (a GRPO group): everything up to the response
    sibling = prompt("What is 2 + 3?", "5", "it is \\boxed{6}")
    assert shared(one, sibling).rstrip().endswith(RESPONSE_BEGIN)
