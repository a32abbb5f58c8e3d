"""MathJudgerConfig / MathVerifyJudgerConfig as judgers: process execution, dedup, hostile inputs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import judger
from judger import RolloutState, Status
from judger.presets.math import MathJudger, MathJudgerConfig
from judger.presets.math_verify import MathVerifyJudgerConfig
from judger.runtime.procpool.shared import shared_pool

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

HOSTILE = {
    "power tower": "\\boxed{9^{9^{9^9}}}",
    "huge factorial": "\\boxed{99999999!}",
    "5,000 nested parentheses": "\\boxed{" + "(" * 5000 + "1" + ")" * 5000 + "}",
}


def state(response: str, gt: str = "1") -> RolloutState:
    return RolloutState(
        message=[{"role": "user", "content": "q"}], response=response, reward_model={"ground_truth": gt}
    )


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, IndexError):
        return False


def test_configs_are_exported_and_pick_their_execution() -> None:
    assert judger.MathJudgerConfig is MathJudgerConfig
    assert judger.MathVerifyJudgerConfig is MathVerifyJudgerConfig
    cfg = MathJudgerConfig()
    assert (cfg.judger_name, cfg.execution, cfg.compat) == (
        "DigitalLearningGmbH/MATH-lighteval",
        "process",
        None,
    )
    assert MathJudgerConfig(compat="verl").execution == "inline"
    assert MathJudgerConfig(compat="verl", execution="process").execution == "process"
    assert MathVerifyJudgerConfig(compat="verl").execution == "process"
    assert isinstance(cfg.build(), MathJudger)
    with pytest.raises(ValueError):
        MathJudgerConfig(compat="xtuner")  # type: ignore[arg-type]


async def test_batch_grades_each_distinct_answer_once_on_the_pool() -> None:
    pool = shared_pool()
    j = MathJudgerConfig().build()
    # a GRPO group: different reasoning, two distinct final answers
    states = [
        state(f"Reasoning {i}. So \\boxed{{{'0.5' if i % 3 else '2'}}}.", "\\frac{1}{2}") for i in range(12)
    ]
    before = pool.stats()["calls"]
    out = await j.batch_judge(states)
    assert pool.stats()["calls"] - before == 2
    assert [s.reward["acc"] for s in out] == [bool(i % 3) for i in range(12)]
    assert all(s.reward["pred"] == ("0.5" if i % 3 else "2") for i, s in enumerate(out))
    out[1].reward["score"] = -5.0  # each sample owns its reward dict
    assert out[2].reward["score"] == 1.0


async def test_a_grade_is_remembered_for_later_batches_a_timeout_is_not() -> None:
    pool = shared_pool()
    j = MathJudgerConfig(timeout=1.0).build()
    batch = [state(f"Try {i}: \\boxed{{{'0.5' if i % 2 else '2'}}}", "\\frac{1}{2}") for i in range(6)]
    first = [dict(s.reward) for s in await j.batch_judge(batch)]
    before = pool.stats()["calls"]
    again = await j.batch_judge([state(s.response, "\\frac{1}{2}") for s in batch])
    assert pool.stats()["calls"] == before  # the same answers to the same problem: not sent again
    assert [s.reward for s in again] == first
    again[1].reward["score"] = -5.0  # each sample owns its reward dict; the kept grade is untouched
    third = await j.batch_judge([state("\\boxed{0.5}", "\\frac{1}{2}")])
    assert third[0].reward == first[1] and first[1]["score"] == 1.0
    assert (await j.batch_judge([state("\\boxed{0.5}", "1/3")]))[0].reward["acc"] is False  # another label
    assert pool.stats()["calls"] == before + 1
    hostile, timeouts = HOSTILE["power tower"], pool.stats()["timeouts"]
    for _ in range(2):  # a timeout depends on the machine's load: graded again, never kept
        out = await j.batch_judge([state(hostile)])
        assert out[0].extra_fields["judge_failure"]["kind"] == "timeout"
    assert pool.stats()["timeouts"] == timeouts + 2


async def test_verl_mode_runs_inline_and_matches_verl() -> None:
    j = MathJudgerConfig(compat="verl").build()
    out = await j.batch_judge([state("\\boxed{5.0}", "5"), state("\\boxed{\\dfrac12}", "0.5")])
    assert [s.reward["score"] for s in out] == [0.0, 1.0]


async def test_single_judge_and_judge_payload_on_raw_payload() -> None:
    j = MathJudgerConfig().build()
    s = await j.judge(state("\\boxed{5.0}", "5"))
    assert s.reward == {"score": 1.0, "acc": True, "pred": "5.0"}
    # a payload built elsewhere (HTTP, composed) still carries the full response
    assert (await j.judge_payload({"response": "so \\boxed{3}", "label": "3"}))["acc"] is True


async def test_hostile_answers_time_out_within_the_deadline_and_leave_no_process() -> None:
    pool = shared_pool()
    j = MathJudgerConfig(timeout=1.0).build()
    await j.judge(state("\\boxed{1}"))  # pool warm: the deadline is what we time
    workers_before = set(pool.worker_pids())
    states = [state(r) for r in HOSTILE.values()] + [state("ok \\boxed{1}")]
    started = time.monotonic()
    out = await j.batch_judge(states)
    elapsed = time.monotonic() - started
    # normally three 1 s deadlines on the pool's workers and their respawns (3-6 s on a busy machine,
    # which once ran past a bound of 6 s); each would run for hours without its deadline
    assert elapsed < 5 * (1.0 * len(HOSTILE) + 1.0)
    for s in out[:-1]:
        assert s.status == Status.FAILED and s.reward is None
        assert s.extra_fields["judge_failure"]["kind"] == "timeout"
        assert "did not finish within 1 s" in s.error_msg
    assert out[-1].reward["acc"] is True
    killed = workers_before - set(pool.worker_pids())
    assert killed
    deadline = time.monotonic() + 5
    while any(alive(p) for p in killed) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in killed)
    while len(pool.worker_pids()) < pool.workers and time.monotonic() < deadline:
        time.sleep(0.05)  # replacements start right after each kill
    assert len(pool.worker_pids()) == pool.workers


async def test_a_10_mb_response_is_scored_from_its_box_without_shipping_it() -> None:
    j = MathJudgerConfig(timeout=5.0).build()
    big = "x" * (10 * 2**20) + " so \\boxed{1}"
    started = time.monotonic()
    s = await j.judge(state(big))
    assert s.reward["acc"] is True and time.monotonic() - started < 5.0
    # Math-Verify over the whole text would ship 10 MB to a worker: refused by the input cap
    mv = MathVerifyJudgerConfig(timeout=5.0).build()
    s = await mv.judge(state(big))
    assert s.status == Status.FAILED and "max_input_bytes" in s.error_msg and "10,48" in s.error_msg


async def test_a_5000_digit_boxed_answer_is_a_wrong_or_right_answer_not_a_failure() -> None:
    big = "9" * 5000  # int() refuses more than 4300 digits
    async with MathJudgerConfig().build() as j:
        wrong, right, other = await j.batch_judge(
            [state(f"\\boxed{{{big}}}", "5"), state(f"\\boxed{{{big}}}", big), state("\\boxed{5}", big)]
        )
    assert [s.status for s in (wrong, right, other)] == [Status.INIT] * 3
    assert [s.reward["score"] for s in (wrong, right, other)] == [0.0, 1.0, 0.0]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(HOSTILE))
async def test_math_verify_judger_survives_each_hostile_answer(name: str) -> None:
    j = MathVerifyJudgerConfig(timeout=1.5).build()
    await j.judge(state("$1$"))
    started = time.monotonic()
    s = await j.judge(state(HOSTILE[name]))
    assert time.monotonic() - started < 5 * 1.5  # normally the 1.5 s deadline and a respawn
    assert s.status == Status.FAILED and s.extra_fields["judge_failure"]["kind"] == "timeout"
    # verl mode: a timeout scores timeout_score, as in verl, and the worker is still killed
    v = MathVerifyJudgerConfig(compat="verl", timeout=1.5, timeout_score=-0.5).build()
    s = await v.judge(state(HOSTILE[name]))
    assert s.reward is not None and s.reward["score"] in (-0.5, 0.0)


async def test_math_verify_judger_verl_mode_scores_on_workers_main_thread() -> None:
    j = MathVerifyJudgerConfig(compat="verl").build()
    out = await j.batch_judge([state("$\\frac{1}{2}$", "0.5"), state("$3$", "4")])
    assert [s.reward["score"] for s in out] == [1.0, 0.0]


async def test_verl_mode_handles_a_10_mb_response_inline_quickly() -> None:
    j = MathJudgerConfig(compat="verl").build()
    started = time.monotonic()
    s = await j.judge(state("{" * (5 * 2**20) + "x" * (5 * 2**20) + " so \\boxed{1}"))
    assert s.reward["acc"] is True and time.monotonic() - started < 5.0
