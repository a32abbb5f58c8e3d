"""verl compatibility: the dispatch table, default_compute_score, loading custom reward functions
(pickling included, through a spawned process), verl-style handlers, and the routing judger."""

from __future__ import annotations

import logging
import multiprocessing
import pickle
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import judger.compat.verl as verl_compat
from judger import GSM8KJudgerConfig, JudgerConfig, RolloutState, Status
from judger.compat.verl import (
    VERL_DATA_SOURCES,
    RewardFunction,
    default_compute_score,
    default_judger_config,
    load_reward_function,
    route_of,
)
from judger.core.errors import JudgeTimeoutError
from judger.presets.base import ScorerJudger

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

APPS_TESTS = {"inputs": ["1\n", "5\n"], "outputs": ["2\n", "6\n"]}
PLUS_ONE = "```python\nprint(int(input()) + 1)\n```"

VERL_STYLE = """
CALLS = []

def compute_score(data_source, solution_str, ground_truth, extra_info=None, bonus=0.0, scale=1.0):
    CALLS.append(data_source)
    ok = solution_str.strip().endswith(str(ground_truth))
    return (1.0 if ok else 0.0) * scale + bonus

def compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos, scale=1.0):
    return [{"score": scale * float(s.strip().endswith(str(g))), "source": d}
            for d, s, g in zip(data_sources, solution_strs, ground_truths)]

async def compute_score_async(data_source, solution_str, ground_truth, extra_info=None):
    return {"score": float(solution_str == ground_truth), "index": (extra_info or {}).get("index")}

def tuple_score(data_source, solution_str, ground_truth, extra_info=None):
    return (solution_str == ground_truth, {"meta": 1})
"""

RUNNER = """
import asyncio
from judger import JudgerConfig, RolloutState

def judge_rows(fn, rows):
    judger = JudgerConfig(judger_name="custom", reward_handler=fn).build()
    states = [RolloutState(data_source=d, response=r, reward_model={"ground_truth": g}) for d, r, g in rows]
    return [(s.status.value, s.reward) for s in asyncio.run(judger.batch_judge(states))]
"""


@pytest.fixture
def reward_file(tmp_path: Path) -> Path:
    path = tmp_path / "my_reward.py"
    path.write_text(textwrap.dedent(VERL_STYLE))
    return path


# --- dispatch ------------------------------------------------------------------------------------


def test_dispatch_table_and_aime_prefix() -> None:
    assert route_of("openai/gsm8k") == "gsm8k"
    assert route_of("HuggingFaceH4/MATH-500") == "math"
    assert route_of("math") == "dapo" and route_of("aime2024") == "dapo" and route_of("aime") == "dapo"
    assert route_of("numina_olympiads") == "prime_math"
    assert route_of("taco") == "code" and route_of("hiyouga/geometry3k") == "geo3k"
    assert route_of("searchR1_bamboogle") == "qa"
    assert len(VERL_DATA_SOURCES) == 25


@pytest.mark.parametrize("data_source", ["unknown", "AIME2024", None, {"openai/gsm8k": 1.0}])
def test_unknown_data_source_lists_the_known_ones(data_source: Any) -> None:
    with pytest.raises(NotImplementedError) as info:
        default_compute_score(data_source, "#### 1", "1")
    message = str(info.value)
    assert "Reward function is not implemented" in message
    assert "'openai/gsm8k'" in message and "'searchR1_nq'" in message and "'aime'" in message


def test_gsm8k_qa_and_code_routes_in_both_modes() -> None:
    assert default_compute_score("openai/gsm8k", "#### 1,234.", "1234") == {
        "score": 1.0,
        "acc": True,
        "pred": "1234",
    }
    assert default_compute_score("openai/gsm8k", "#### 1,234.", "1234", compat="verl")["score"] == 0.0
    qa = default_compute_score(
        "searchR1_nq", "<answer>The Eiffel Tower</answer>", {"target": ["eiffel tower"]}
    )
    assert qa == {"score": 1.0, "acc": True, "pred": "The Eiffel Tower"}
    code = default_compute_score("apps", PLUS_ONE, APPS_TESTS, memory_limit_mb=256)
    assert code == {"score": 1.0, "acc": True, "pred": "print(int(input()) + 1)\n"}
    full = default_compute_score("codeforces", PLUS_ONE, APPS_TESTS, full_output=True)
    assert full["passed"] == 2 and full["total"] == 2
    # what verl's managers add to a call is accepted and unused; anything else is refused by name
    assert default_compute_score("openai/gsm8k", "#### 3", "3", concurrent_semaphore=None, num_turns=2)["acc"]
    assert default_compute_score("openai/gsm8k", "#### 3", "3", reward_router_address="127.0.0.1:9")["acc"]
    for misplaced in ({"failure_score": -1.0}, {"on_faliure": "raise"}):
        with pytest.raises(TypeError, match=next(iter(misplaced))):
            default_compute_score("openai/gsm8k", "#### 3", "3", **misplaced)


def test_math_routes_in_both_modes() -> None:
    assert default_compute_score("lighteval/MATH", "so \\boxed{5.0}", "5")["acc"] is True
    assert default_compute_score("lighteval/MATH", "so \\boxed{5.0}", "5", compat="verl")["acc"] is False
    assert default_compute_score("aime2025", "Answer: 5.0", "5")["score"] == 1.0
    assert default_compute_score("aime2025", "Answer: 5.0", "5", compat="verl")["score"] == -1.0
    # prime_math's percent rule would call 500 equal to 5; ours does not
    assert default_compute_score("numina_amc_aime", "\\boxed{500}", "5")["acc"] is False
    assert default_compute_score("numina_amc_aime", "\\boxed{\\frac{1}{2}}", "0.5")["acc"] is True


BIG = "9" * 5000  # past the interpreter's 4300-digit limit on int(str)


@pytest.mark.parametrize(
    "data_source", ["lighteval/MATH", "DigitalLearningGmbH/MATH-lighteval", "numina_aops_forum"]
)
def test_a_5000_digit_boxed_answer_is_a_plain_verdict_in_both_modes(data_source: str) -> None:
    """It used to raise ValueError (int conversion limit) out of default_compute_score: in verl that
    ends the training step. A wrong long answer scores 0, a right one 1, and verl mode keeps verl's
    own string comparison."""
    from judger.scorers.math.reward import compute_score_verl

    response = f"The answer is \\boxed{{{BIG}}}"
    for compat in (None, "verl"):
        assert default_compute_score(data_source, response, "5", compat=compat)["score"] == 0.0
        assert default_compute_score(data_source, response, BIG, compat=compat)["score"] == 1.0
        assert default_compute_score(data_source, response, BIG[:-1] + "8", compat=compat)["score"] == 0.0
    for label in ("5", BIG, "0" + BIG):
        if route_of(data_source) == "math":
            assert default_compute_score(data_source, response, label, compat="verl") == dict(
                compute_score_verl(response, label)
            )


def test_a_scorer_that_raises_scores_zero_with_a_warning_or_raises(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import judger.scorers.math.gsm8k as gsm8k

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("scorer bug")

    monkeypatch.setattr(gsm8k, "compute_score", broken)
    with caplog.at_level(logging.WARNING, logger="judger.compat.verl"):
        assert default_compute_score("openai/gsm8k", "#### 5", "5")["score"] == 0.0
    assert "scorer bug" in caplog.text
    with pytest.raises(ValueError, match="scorer bug"):
        default_compute_score("openai/gsm8k", "#### 5", "5", on_failure="raise")


def test_a_hung_math_sample_scores_zero_or_raises(caplog: pytest.LogCaptureFixture) -> None:
    hostile = "\\boxed{9^{9^{9^{9^{9}}}}}"
    with caplog.at_level(logging.WARNING, logger="judger.compat.verl"):
        out = default_compute_score("lighteval/MATH", hostile, "3", timeout=1.0)
    assert out == {"score": 0.0, "acc": False, "pred": None}
    assert "scoring 0" in caplog.text
    with pytest.raises(JudgeTimeoutError):
        default_compute_score("lighteval/MATH", hostile, "3", timeout=1.0, on_failure="raise")


def test_default_compute_score_loads_as_a_custom_reward_function() -> None:
    fn = load_reward_function(verl_compat.__file__, "default_compute_score", {"compat": "verl"})
    assert fn("openai/gsm8k", "#### 72.", "72")["score"] == 0.0  # config kwargs win over call kwargs
    assert fn("openai/gsm8k", "#### 72", "72", compat=None)["score"] == 1.0


# --- load_reward_function ------------------------------------------------------------------------


def test_load_from_file_registers_a_stable_module(reward_file: Path) -> None:
    fn = load_reward_function(str(reward_file))
    again = load_reward_function(reward_file)  # a Path works too, and loads the module once
    assert isinstance(fn, RewardFunction)
    module = sys.modules[fn.fn.__module__]
    assert module.__file__ == str(reward_file.resolve())
    assert fn.fn is again.fn
    # the raw function pickles by reference now that its module is registered
    assert pickle.loads(pickle.dumps(fn.fn)) is fn.fn
    assert fn("d", "answer: 7", "7") == 1.0


def test_reward_kwargs_override_call_kwargs(reward_file: Path) -> None:
    fn = load_reward_function(reward_file, "compute_score", {"scale": 2.0})
    assert fn("d", "7", "7", scale=10.0, bonus=0.5) == 2.5
    clone = pickle.loads(pickle.dumps(fn))
    assert clone("d", "7", "7") == 2.0 and clone.reward_kwargs == {"scale": 2.0}


def test_load_errors(reward_file: Path, tmp_path: Path) -> None:
    with pytest.raises(AttributeError, match="nope"):
        load_reward_function(reward_file, "nope")
    with pytest.raises(FileNotFoundError):
        load_reward_function(tmp_path / "missing.py")
    assert load_reward_function("judger.scorers.math.gsm8k", "compute_score")("#### 2", "2")["acc"] is True


async def test_verl_style_functions_as_reward_handlers(reward_file: Path) -> None:
    rows = [("src_a", "x 7", "7"), ("src_b", "x 8", "7")]

    def states() -> list[RolloutState]:
        return [RolloutState(data_source=d, response=r, reward_model={"ground_truth": g}) for d, r, g in rows]

    # declared safe on threads: the calls are then seen in this process's module (in worker
    # processes, each has its own copy)
    single = JudgerConfig(
        judger_name="s", reward_handler=load_reward_function(reward_file, "compute_score"), execution="thread"
    ).build()
    out = await single.batch_judge(states())
    assert [s.reward for s in out] == [{"score": 1.0}, {"score": 0.0}]
    # each sample reached the function with its own data_source (sync handlers run on worker
    # threads, so the order of the two calls is not part of the contract)
    calls = sys.modules[load_reward_function(reward_file).fn.__module__].CALLS
    assert sorted(calls[-2:]) == ["src_a", "src_b"]

    batch_fn = load_reward_function(reward_file, "compute_score_batch", {"scale": 3.0})
    batch = JudgerConfig(judger_name="b", reward_handler=batch_fn).build()
    out = await batch.batch_judge(states())
    assert [s.reward for s in out] == [{"score": 3.0, "source": "src_a"}, {"score": 0.0, "source": "src_b"}]

    async_fn = load_reward_function(reward_file, "compute_score_async")
    asynchronous = JudgerConfig(judger_name="a", reward_handler=async_fn).build()
    state = RolloutState(
        response="7", reward_model={"ground_truth": "7"}, extra_fields={"extra_info": {"index": 4}}
    )
    assert (await asynchronous.judge(state)).reward == {"score": 1.0, "index": 4}

    tuples = JudgerConfig(
        judger_name="t", reward_handler=load_reward_function(reward_file, "tuple_score")
    ).build()
    (first,) = await tuples.batch_judge([RolloutState(response="7", reward_model={"ground_truth": "7"})])
    assert first.reward == {"score": 1.0}


def test_file_loaded_functions_run_in_a_spawned_process(reward_file: Path, tmp_path: Path) -> None:
    runner_file = tmp_path / "runner.py"
    runner_file.write_text(textwrap.dedent(RUNNER))
    runner = load_reward_function(runner_file, "judge_rows")
    rows = [("src_a", "x 7", "7"), ("src_b", "x 8", "7")]
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        single = pool.apply(
            runner, (load_reward_function(reward_file, "compute_score", {"bonus": 0.5}), rows)
        )
        batch = pool.apply(runner, (load_reward_function(reward_file, "compute_score_batch"), rows))
    assert single == [("init", {"score": 1.5}), ("init", {"score": 0.5})]
    assert batch == [("init", {"score": 1.0, "source": "src_a"}), ("init", {"score": 0.0, "source": "src_b"})]


# --- default_judger_config -----------------------------------------------------------------------


class CountingJudger(ScorerJudger):
    batches: list[int]

    async def run_payloads(self, payloads: Any) -> Any:
        self.batches.append(len(payloads))
        return await super().run_payloads(payloads)


def counting_gsm8k() -> CountingJudger:
    config = GSM8KJudgerConfig()
    judger = CountingJudger(config.judger_name, config.scorer(), config.scorer_options())
    judger.batches = []
    return judger


async def test_router_judges_each_sample_by_its_data_source() -> None:
    gsm8k = counting_gsm8k()
    judger = default_judger_config(overrides={"gsm8k": gsm8k}).build()
    rows: list[tuple[Any, str, Any]] = [
        ("openai/gsm8k", "#### 72.", "72"),
        ("searchR1_nq", "<answer>Paris</answer>", {"target": ["paris"]}),
        ("aime2024", "Answer: 5", "5"),
        ("unknown_source", "#### 1", "1"),
        ("openai/gsm8k", "#### 71", "72"),
        ("apps", PLUS_ONE, APPS_TESTS),
        ("lighteval/MATH", "\\boxed{\\frac{1}{2}}", "0.5"),
        (None, "#### 1", "1"),
    ]
    states = [RolloutState(data_source=d, response=r, reward_model={"ground_truth": g}) for d, r, g in rows]
    out = await judger.batch_judge(states)
    scores = [s.reward["score"] if s.reward else None for s in out]
    assert scores == [1.0, 1.0, 1.0, None, 0.0, 1.0, 1.0, None]
    assert gsm8k.batches == [2]  # one batched call per route
    for failed in (out[3], out[7]):
        assert failed.status == Status.FAILED
        assert failed.error_msg and failed.error_msg.startswith(
            "NotImplementedError: Reward function is not implemented"
        )
    assert out[5].reward["passed"] == 2  # type: ignore[index]
    # single-sample judging goes the same way
    one = await judger.judge(
        RolloutState(data_source="openai/gsm8k", response="#### 72", reward_model={"ground_truth": "72"})
    )
    assert one.reward == {"score": 1.0, "acc": True, "pred": "72"}
    await judger.aclose()


async def test_router_in_verl_mode() -> None:
    judger = default_judger_config(compat="verl").build()
    states = [
        RolloutState(data_source="openai/gsm8k", response="#### 72.", reward_model={"ground_truth": "72"}),
        RolloutState(data_source="math_dapo", response="Answer: 5.0", reward_model={"ground_truth": "5"}),
    ]
    out = await judger.batch_judge(states)
    assert [s.reward["score"] for s in out] == [0.0, -1.0]  # type: ignore[index]


def test_router_config_validation_and_serialisation() -> None:
    with pytest.raises(ValueError, match="unknown routes"):
        default_judger_config(overrides={"chess": GSM8KJudgerConfig()}).build()
    config = default_judger_config(compat="verl")
    assert type(config).model_validate_json(config.model_dump_json()) == config


def test_sandbox_fusion_url_runs_code_on_that_server() -> None:
    # verl passes sandbox_fusion_url to default_compute_score; the code routes then run there
    from judger.testing import serve_asgi
    from judger.testing.fake_sandbox_fusion import FakeSandboxFusion

    fake = FakeSandboxFusion()
    add = {"inputs": ["1 2", "3 4"], "outputs": ["3", "7"]}
    code = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    with serve_asgi(fake.app) as server:
        result = verl_compat.default_compute_score("codecontests", code, add, sandbox_fusion_url=server.url)
    assert result["score"] == 1.0
    assert [r["stdin"] for r in fake.requests] == ["1 2", "3 4"]
    # without it, the local sandbox scores the same and the server sees nothing more
    assert verl_compat.default_compute_score("codecontests", code, add)["score"] == 1.0
    assert len(fake.requests) == 2


@pytest.mark.parametrize("batch", [False, True])
def test_the_question_verl_keeps_in_extra_info_is_the_prompt_the_math_grading_reads(batch: bool) -> None:
    from judger.compat.verl import default_compute_score, default_compute_score_batch

    source = "DigitalLearningGmbH/MATH-lighteval"
    cases = [  # (response, label, question, score with the question, without it)
        ("\\boxed{2.83}", "2\\sqrt{2}", "What is $\\sqrt{8}$ to the nearest hundredth?", 1.0, 0.0),
        ("\\boxed{\\frac{8}{22}}", "\\frac{4}{11}", "Simplify $\\frac{8}{22}$.", 0.0, 1.0),
    ]
    for response, label, question, asked, bare in cases:
        for extra, expected in (({"question": question}, asked), ({}, bare)):
            if batch:
                (out,) = default_compute_score_batch([source], [response], [label], [extra])
            else:
                out = default_compute_score(source, response, label, extra)
            assert out["score"] == expected, (response, extra)
