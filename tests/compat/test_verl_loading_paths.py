"""verl's loading paths in the main environment (no verl installed): how verl loads judger,
missing labels, reward_extra_info keys. tests/clients runs the same paths through verl's own code."""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import judger.compat.verl as verl_compat
from judger import JudgerConfig
from judger.compat.verl import VerlScore, default_compute_score, default_compute_score_batch, managers
from judger.compat.verl.routes import ROUTES, VERL_DATA_SOURCES, find_route

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]


def load_like_verl(path: str, name: str) -> Any:
    """verl.utils.import_utils.load_module for a file path: a module NOT registered in sys.modules."""
    spec = importlib.util.spec_from_file_location(f"custom_module_{hash(path)}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


# --- every documented path pickles, and verl's prime manager reads float(result[0]) ----


@pytest.mark.parametrize("file", ["__init__.py", "compute_score.py"])
def test_default_compute_score_loaded_by_file_path_pickles(file: str) -> None:
    path = str(Path(verl_compat.__file__).with_name(file))
    fn = load_like_verl(path, "default_compute_score")
    clone = pickle.loads(pickle.dumps(fn))
    assert clone is default_compute_score
    assert clone("openai/gsm8k", "#### 7", "7")["score"] == 1.0


def test_result_serves_verl_prime_and_float_option() -> None:
    result = default_compute_score("openai/gsm8k", "#### 7", "7")
    assert isinstance(result, VerlScore) and result == {"score": 1.0, "acc": True, "pred": "7"}
    assert float(result[0]) == 1.0 and float(result) == 1.0  # verl's prime: float(result[0])
    assert pickle.loads(pickle.dumps(result)) == result
    plain = default_compute_score("openai/gsm8k", "#### 8", "7", as_float=True)
    assert type(plain) is float and plain == 0.0


# --- a None label scores 0.0 as in verl, with a warning --------------------------------


@pytest.mark.parametrize("data_source", ["math_dapo", "lighteval/MATH", "openai/gsm8k", "searchR1_nq"])
@pytest.mark.parametrize("compat", ["verl", None])
def test_none_label_scores_zero_with_a_warning(
    data_source: str, compat: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="judger.compat.verl.compute_score"):
        result = default_compute_score(data_source, "Answer: 5 \\boxed{5}", None, compat=compat)
    assert result == {"score": 0.0, "acc": False, "pred": None}
    with pytest.raises(ValueError, match="no label"):
        default_compute_score(data_source, "Answer: 5", None, compat=compat, on_failure="raise")


def test_none_label_warning_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    from judger.compat.verl import compute_score as module

    module._missing_labels.count = 0
    with caplog.at_level(logging.WARNING, logger="judger.compat.verl.compute_score"):
        default_compute_score("math_dapo", "Answer: 5", None, compat="verl")
    assert "has no label" in caplog.text and "scored 0.0" in caplog.text


# --- the batch form -------------------------------------------------------------------------------


def test_batch_form_equals_the_single_form() -> None:
    rows = [
        ("openai/gsm8k", "#### 7", "7"),
        ("lighteval/MATH", "\\boxed{\\frac12}", "0.5"),
        ("math_dapo", "Answer: 5.0", "5"),
        ("openai/gsm8k", "#### 7", None),
    ]
    for compat in (None, "verl"):
        batch = default_compute_score_batch(
            data_sources=[r[0] for r in rows],
            solution_strs=[r[1] for r in rows],
            ground_truths=[r[2] for r in rows],
            extra_infos=[{} for _ in rows],
            compat=compat,
        )
        single = [default_compute_score(*r, compat=compat) for r in rows]
        assert [b["score"] for b in batch] == [s["score"] for s in single]
    floats = default_compute_score_batch(["openai/gsm8k"], ["#### 7"], ["7"], as_float=True)
    assert floats == [1.0]


def test_one_route_table() -> None:
    assert set(VERL_DATA_SOURCES.values()) == {route.name for route in ROUTES}
    assert find_route("aime2025").name == "dapo"
    for route in ROUTES:
        assert isinstance(route.config(None), JudgerConfig) and isinstance(route.config("verl"), JudgerConfig)
        assert callable(route.compute_score())
    # the CLI's default and the router read the same table
    from judger.cli.judging import default_config

    router = default_config("verl").build()
    for route in ROUTES:
        for data_source in route.data_sources:
            assert router.route(data_source) == [route.name]


# --- managers built the way verl builds them ------------------------------------------


class Item:
    """One row of a verl DataProto, as its managers index it (batch tensors + non_tensor_batch)."""

    def __init__(self, response: str, ground_truth: Any, data_source: str, width: int = 32) -> None:
        ids = [ord(c) for c in response][:width]
        self.batch = {
            "responses": np.array(ids + [0] * (width - len(ids))),
            "attention_mask": np.array([1, 1] + [1] * len(ids) + [0] * (width - len(ids))),
        }
        self.non_tensor_batch = {
            "data_source": data_source,
            "reward_model": {"ground_truth": ground_truth},
            "extra_info": {},
        }

    def __getitem__(self, key: Any) -> Any:
        return self


class CharTokenizer:
    eos_token = "</s>"

    def decode(self, ids: Any, skip_special_tokens: bool = True) -> str:
        return "".join(chr(int(i)) for i in ids)

    def batch_decode(self, rows: Any, skip_special_tokens: bool = True) -> list[str]:
        return [self.decode(r) for r in rows]


class CountingJudger:
    def __init__(self) -> None:
        self.batches: list[int] = []
        self.inner = JudgerConfig(
            judger_name="ends_with",
            reward_handler=lambda response, label, extra_info: {
                "score": float(response.endswith(str(label))),
                "acc": response.endswith(str(label)),
                "pred": response[-1:],
            },
        ).build()

    def build(self) -> Any:
        outer = self

        class Wrapped(type(self.inner)):  # type: ignore[misc]
            async def batch_judge(self, states: list[Any]) -> list[Any]:
                outer.batches.append(len(states))
                return await super().batch_judge(states)

        self.inner.__class__ = Wrapped
        return self.inner


def test_reward_loop_form_batches_concurrent_run_single_calls() -> None:
    counting = CountingJudger()
    config = {"reward": {"reward_kwargs": {"judger": counting}}}
    manager = managers.NaiveRewardManager(config=config, tokenizer=CharTokenizer(), compute_score=None)

    async def chunk() -> list[dict[str, Any]]:
        items = [Item(f"answer {i}", str(i % 3), "x") for i in range(6)]
        return await asyncio.gather(*(manager.run_single(item) for item in items))

    outputs = asyncio.run(chunk())
    assert counting.batches == [6]  # one batch_judge for verl's whole chunk
    assert [o["reward_score"] for o in outputs] == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert list(outputs[0]["reward_extra_info"]) == ["score", "acc", "pred", "judge_failure"]


def test_verl_constructor_forms() -> None:
    tok = CharTokenizer()
    legacy = managers.NaiveRewardManager(tok, 0, default_compute_score)
    assert legacy.tokenizer is tok and legacy.num_examine == 0

    class Overlong:
        enable, len, penalty_factor, log = True, 4, 1.0, True

    dapo = managers.DAPORewardManager(tok, 0, max_resp_len=8, overlong_buffer_cfg=Overlong())
    assert dapo.adjust(1.0, 6, {})[0] == 0.5
    with pytest.raises(ValueError, match="max_resp_len"):
        managers.DAPORewardManager(tok, 0, overlong_buffer_cfg=Overlong())
    with pytest.raises(TypeError, match="only DAPORewardManager"):
        managers.NaiveRewardManager(tok, 0, max_resp_len=8, overlong_buffer_cfg=Overlong())
    with pytest.raises(TypeError, match="unknown reward_kwargs"):
        managers.NaiveRewardManager(tok, 0, bogus=1)


def test_custom_verl_function_runs_through_batch_judge() -> None:
    calls: list[dict[str, Any]] = []

    def compute_score(
        data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None, **kw: Any
    ) -> float:
        calls.append(kw)
        return float(solution_str.endswith(str(ground_truth)))

    import functools

    def _call_with_kwargs(raw_fn: Any, extra_kwargs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        return raw_fn(*args, **{**kwargs, **extra_kwargs})

    wrapped = functools.partial(_call_with_kwargs, compute_score, {"bonus": 1})  # how verl wraps it
    manager = managers.NaiveRewardManager(config={}, tokenizer=CharTokenizer(), compute_score=wrapped)

    async def one() -> dict[str, Any]:
        return await manager.run_single(Item("so 7", "7", "anything"))

    assert asyncio.run(one())["reward_score"] == 1.0 and calls == [{"bonus": 1}]


# --- reward_extra_info keys are documented and selectable -------------------------------


@pytest.mark.parametrize(
    ("keys", "expected"),
    [(None, ["score", "acc", "pred", "judge_failure"]), ([], []), (["acc"], ["acc"])],
)
def test_reward_extra_keys_select_the_headline_metric(keys: Any, expected: list[str]) -> None:
    options = {} if keys is None else {"reward_extra_keys": keys}
    manager = managers.NaiveRewardManager(
        config={"reward": {"reward_kwargs": options}}, tokenizer=CharTokenizer(), compute_score=None
    )

    async def one() -> dict[str, Any]:
        return await manager.run_single(Item("#### 7", "7", "openai/gsm8k"))

    out = asyncio.run(one())
    assert out["reward_score"] == 1.0 and list(out["reward_extra_info"]) == expected
    assert "reward_extra_keys" in managers.__doc__ and "headline" in managers.__doc__


def test_failed_sample_gets_the_failure_score_and_says_why(caplog: pytest.LogCaptureFixture) -> None:
    manager = managers.NaiveRewardManager(
        config={"reward": {"reward_kwargs": {"failure_score": -1.0}}},
        tokenizer=CharTokenizer(),
        compute_score=None,
    )

    async def one() -> dict[str, Any]:
        return await manager.run_single(Item("\\boxed{5}", None, "lighteval/MATH"))

    with caplog.at_level(logging.WARNING):
        out = asyncio.run(one())
    assert out["reward_score"] == -1.0 and out["reward_extra_info"]["judge_failure"] == "error"
    assert "ground truth is None" in caplog.text


def test_manager_warns_on_a_missing_label_even_when_verl_mode_scores_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    manager = managers.NaiveRewardManager(
        config={"reward": {"reward_kwargs": {"compat": "verl"}}},
        tokenizer=CharTokenizer(),
        compute_score=None,
    )

    async def one() -> dict[str, Any]:
        return await manager.run_single(Item("#### 7", None, "openai/gsm8k"))

    from judger.compat.verl import batch

    batch._missing_labels.count = 0
    with caplog.at_level(logging.WARNING, logger="judger.compat.verl.batch"):
        out = asyncio.run(one())
    assert out["reward_score"] == 0.0 and "has no label" in caplog.text


def test_judger_option_and_a_custom_compute_score_are_refused_together() -> None:
    def my_score(data_source: str, solution_str: str, ground_truth: str, extra_info: Any = None) -> float:
        return 1.0

    config = {"reward": {"reward_kwargs": {"judger": CountingJudger()}}}
    with pytest.raises(ValueError, match="reward_kwargs.judger and a custom compute_score"):
        managers.NaiveRewardManager(config=config, tokenizer=CharTokenizer(), compute_score=my_score)
    # verl's default scorer is what verl passes when no custom function is set: no conflict
    manager = managers.NaiveRewardManager(
        config=config, tokenizer=CharTokenizer(), compute_score=default_compute_score
    )
    assert manager.judger is not None
