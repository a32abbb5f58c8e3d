from __future__ import annotations

import pickle
from typing import Any

import pytest
from pydantic import ValidationError

from judger import (
    ComposedJudger,
    ComposedJudgerConfig,
    CPUResourcesConfig,
    JudgerConfig,
    NativeJudger,
    RolloutState,
    build_judger,
)

pytestmark = pytest.mark.py310


def test_judger_config_defaults_match_xtuner() -> None:
    cfg = JudgerConfig(judger_name="j", reward_handler="judger.testing.handlers:exact_match")
    assert cfg.request_timeout == 30.0 and cfg.extra_info == {} and cfg.cpu_resources is None
    assert cfg.on_error == "fail" and cfg.timeout == 60.0


def test_judger_name_is_required_and_extra_fields_are_forbidden() -> None:
    with pytest.raises(ValidationError, match="judger_name"):
        JudgerConfig()  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="reward_fn"):
        JudgerConfig(judger_name="j", reward_fn=print)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("timeout", 0),
        ("request_timeout", -1),
        ("on_error", "ignore"),
        ("max_concurrency", 0),
        ("reward_handler", "not a handler"),
    ],
)
def test_bad_values_name_the_field(field: str, value: Any) -> None:
    with pytest.raises(ValidationError, match=field):
        JudgerConfig(judger_name="j", **{field: value})


def test_cpu_resources_validation() -> None:
    res = CPUResourcesConfig()
    assert (res.num_workers, res.num_cpus_per_worker, res.cpu_memory_per_worker) == (1, 1, 1024**3)
    for field, value in [("num_workers", 0), ("num_cpus_per_worker", 0), ("cpu_memory_per_worker", 0)]:
        with pytest.raises(ValidationError, match=field):
            CPUResourcesConfig(**{field: value})


def test_build_local_and_build_give_a_native_judger() -> None:
    cfg = JudgerConfig(judger_name="j", reward_handler="judger.testing.handlers:exact_match", timeout=5)
    for judger in (cfg.build_local(), cfg.build(), build_judger(cfg)):
        assert isinstance(judger, NativeJudger)
        assert judger.get_judger_name() == "j" and judger.timeout == 5


def test_import_string_configs_pickle_and_serialise() -> None:
    cfg = ComposedJudgerConfig(
        branches={"a": JudgerConfig(judger_name="a", reward_handler="judger.testing.handlers:exact_match")},
        merge_fn="judger.judgers.composed:weighted_sum",
    )
    again = pickle.loads(pickle.dumps(cfg))
    assert again == cfg
    assert ComposedJudgerConfig.model_validate_json(cfg.model_dump_json()) == cfg


async def test_subclassed_config_builds_its_own_judger() -> None:
    from judger import Judger

    class ToolJudger(Judger):
        async def judge_payload(self, payload: Any) -> Any:
            return {"score": 3.0}

    class ToolJudgerConfig(JudgerConfig):
        judger_name: str = "tool_judger"

        def build_local(self) -> ToolJudger:
            return ToolJudger(self.judger_name)

    judger = ToolJudgerConfig().build()
    assert isinstance(judger, ToolJudger) and judger.get_judger_name() == "tool_judger"
    assert (await judger.judge(RolloutState(response="x"))).reward == {"score": 3.0}


def test_composed_config_builds_recursively_and_accepts_judgers() -> None:
    leaf = JudgerConfig(judger_name="leaf", reward_handler="judger.testing.handlers:exact_match")
    built = NativeJudger("ready", "judger.testing.handlers:exact_match")
    cfg = ComposedJudgerConfig(
        branches={"leaf": leaf, "ready": built, "nested": ComposedJudgerConfig(branches={"x": leaf})}
    )
    judger = build_judger(cfg)
    assert isinstance(judger, ComposedJudger)
    assert judger.branches["ready"] is built and isinstance(judger.branches["nested"], ComposedJudger)


def test_composed_config_rejects_non_judgers() -> None:
    with pytest.raises(ValidationError, match="branch 'a' must be a JudgerConfig"):
        ComposedJudgerConfig(branches={"a": "openai/gsm8k"})


def test_build_judger_rejects_other_types() -> None:
    with pytest.raises(TypeError, match="JudgerConfig or ComposedJudgerConfig"):
        build_judger({"judger_name": "x"})  # type: ignore[arg-type]
