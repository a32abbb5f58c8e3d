"""judger as a NeMo-RL environment (7ea279a; not on the package registry: its ``nemo-rl`` there is a
placeholder), built and called exactly as NeMo-RL's source does it, as a real Ray actor on a local
Ray. NeMo-RL's registries are plain module-level dicts; ``register`` is checked against stand-in
modules holding them (``nemo_rl/environments/utils.py`` 31, 135-139;
``nemo_rl/distributed/ray_actor_environment_registry.py``; ``virtual_cluster.py`` 55-56)."""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest

from judger.compat import nemo_rl
from judger.core.errors import ConfigError

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ray_local() -> Iterator[Any]:
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture
def nemo_registries(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    env_registry: dict[str, dict[str, str]] = {
        "math": {"actor_class_fqn": "nemo_rl.environments.math_environment.MathEnvironment"}
    }
    actor_registry: dict[str, str] = {}

    def register_env(env_name: str, actor_class_fqn: str) -> None:  # utils.py 135-139
        if env_name in env_registry:
            raise ValueError(f"Env name {env_name} already registered")
        env_registry[env_name] = {"actor_class_fqn": actor_class_fqn}

    modules = {
        "nemo_rl": {},
        "nemo_rl.environments": {},
        "nemo_rl.environments.utils": {"ENV_REGISTRY": env_registry, "register_env": register_env},
        "nemo_rl.distributed": {},
        "nemo_rl.distributed.ray_actor_environment_registry": {"ACTOR_ENVIRONMENT_REGISTRY": actor_registry},
        "nemo_rl.distributed.virtual_cluster": {
            "PY_EXECUTABLES": types.SimpleNamespace(SYSTEM=sys.executable)
        },
    }
    for name, attrs in modules.items():
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, module)
    return {"env": env_registry, "actor": actor_registry}


def create_env(registries: dict[str, Any], env_name: str, env_config: dict[str, Any]) -> Any:
    """``nemo_rl/environments/utils.py`` 106-132: the class its ``ENV_REGISTRY`` names (hydra's
    ``get_object``), the Python its actor registry names, ``.options(runtime_env=...).remote(cfg)``."""
    from hydra.utils import get_object

    fqn = registries["env"][env_name]["actor_class_fqn"]
    actor_class = get_object(fqn)
    py_exec = registries["actor"][fqn]
    return actor_class.options(runtime_env={"py_executable": py_exec, "env_vars": dict(os.environ)}).remote(
        env_config
    )


def test_register_makes_both_entries_once(nemo_registries: dict[str, Any]) -> None:
    nemo_rl.register("judger")
    nemo_rl.register("judger")  # again: nothing changes
    assert nemo_registries["env"]["judger"] == {"actor_class_fqn": "judger.compat.nemo_rl.JudgerEnvironment"}
    assert nemo_registries["actor"]["judger.compat.nemo_rl.JudgerEnvironment"] == sys.executable
    with pytest.raises(ValueError, match="already registered"):
        nemo_rl.register("math")  # another environment's name: NeMo-RL refuses it


def test_the_environment_runs_as_nemo_rls_ray_actor(nemo_registries: dict[str, Any], ray_local: Any) -> None:
    """``calculate_rewards`` (``nemo_rl/experience/rollouts.py`` 705-802): message logs of role and
    content, the batch's ``extra_env_info`` as metadata, ``step.remote`` and ``ray.get``; then
    ``global_post_process_and_metrics`` on the step's batch."""
    import torch

    nemo_rl.register("judger")
    env = create_env(nemo_registries, "judger", {"config": "dapomath"})
    logs = [
        [{"role": "user", "content": "6 x 7?"}, {"role": "assistant", "content": f"Answer: {n}"}]
        for n in (42, 41, 42)
    ]
    metadata = [{"ground_truth": "42"}, {"ground_truth": "42"}, {"ground_truth": None}]
    observations, meta, stops, rewards, terminateds, answers = ray_local.get(env.step.remote(logs, metadata))
    # a float tensor of shape [B]; the failed sample (no label) gets DAPO's lowest score, -1
    assert rewards.dtype == torch.float32 and rewards.tolist() == [1.0, -1.0, -1.0]
    assert terminateds.tolist() == [1.0, 1.0, 1.0] and stops == [None, None, None]
    assert [o["content"] for o in observations] == [
        "Environment: correct",
        "Environment: incorrect",
        "Environment: judge failed",
    ]
    assert [m["judge_failed"] for m in meta] == [False, False, True]
    assert "ground truth is None" in meta[2]["judge_failure"] and meta[0]["ground_truth"] == "42"
    assert answers[0] == "42"
    batch = {"rewards": rewards, "is_end": torch.tensor([1, 1, 0])}
    _, metrics = ray_local.get(env.global_post_process_and_metrics.remote(batch))
    assert metrics["accuracy"] == pytest.approx(0.0) and metrics["judge_failed"] == pytest.approx(1 / 3)
    ray_local.kill(env)


def test_unknown_config_keys_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"unknown key\(s\) \['num_workers'\]"):
        nemo_rl.JudgerEnvironmentImpl({"config": "math", "num_workers": 8})
