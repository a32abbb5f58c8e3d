"""A NeMo-RL environment backed by a judger: ``judger.compat.nemo_rl.JudgerEnvironment``.

    # before NeMo-RL builds its environments (e.g. at the top of your run script):
    from judger.compat.nemo_rl import register
    register("judger")
    # YAML:  env: {judger: {config: math, label_key: ground_truth}}, and the data's task is "judger"

NeMo-RL (7ea279a) builds an environment with ``create_env(name, env_config)``
(``nemo_rl/environments/utils.py``): the class named in ``ENV_REGISTRY`` (filled by ``register_env``),
run as a Ray actor in the Python its ``ACTOR_ENVIRONMENT_REGISTRY`` entry names, made with the YAML
``env.<name>`` dict. :func:`register` makes both entries. The rollout calls ``step(message_logs,
metadata)`` (``nemo_rl/experience/rollouts.py``); an exception crashes the training step. Here:

- the config dict's keys are ``config`` (the judger: a preset name, ``path/to/config.py[:NAME]``
  or ``pkg.module:name``; default ``$JUDGER_CONFIG``), ``label_key`` (the metadata's label, default
  ``ground_truth`` as NeMo-RL's math data has it) and ``failure_reward`` (default ``lowest``); any
  other key is refused by name when the actor starts;
- the response is the conversation's assistant messages joined (as NeMo-RL's math environment
  reads it), the other messages the prompt; ``data_source`` and ``extra_info`` come from the metadata;
- ``step`` returns ``EnvironmentReturn``: ``rewards`` the judger's scores (a float tensor of shape
  [B]), ``terminateds`` ones (single turn), ``answers`` the judger's ``pred``; a sample the judger
  fails on gets the failure reward (default the judger's lowest score) and its reason in its
  metadata (``judge_failure``, with ``judge_failed``), and is logged. Never an exception;
- ``global_post_process_and_metrics`` reports ``accuracy`` (the mean reward of properly ended
  samples, as NeMo-RL's math environment does) and ``judge_failed`` (the failed fraction since the
  last call).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import ray

from judger.compat.scoring import FAILED_KEY, FAILURE_KEY, Outcome, Scorer, row_value
from judger.core.errors import ConfigError
from judger.core.rollout import RolloutState, Status

FQN = "judger.compat.nemo_rl.JudgerEnvironment"
OPTIONS = ("config", "label_key", "failure_reward")
DEFAULT_LABEL_KEY = "ground_truth"


class EnvironmentReturn(NamedTuple):
    """NeMo-RL's ``EnvironmentReturn`` (``nemo_rl/environments/interfaces.py``), field for field,
    used where NeMo-RL is not installed."""

    observations: list[dict[str, str]]
    metadata: list[Any]
    next_stop_strings: list[Any]
    rewards: Any
    terminateds: Any
    answers: list[str | None] | None


def _return_type() -> Any:
    try:
        from nemo_rl.environments.interfaces import EnvironmentReturn as NemoEnvironmentReturn
    except ImportError:
        return EnvironmentReturn
    return NemoEnvironmentReturn


def check_config(cfg: Mapping[str, Any] | None) -> dict[str, Any]:
    """The environment's config dict, every key known."""
    cfg = dict(cfg or {})
    unknown = sorted(set(cfg) - set(OPTIONS))
    if unknown:
        raise ConfigError(
            f"env config: unknown key(s) {unknown}; judger's NeMo-RL environment takes {list(OPTIONS)}"
        )
    return cfg


def conversation_state(messages: Sequence[Mapping[str, Any]], metadata: Any, label_key: str) -> RolloutState:
    """One NeMo-RL message log and its metadata as a state."""
    meta = metadata if isinstance(metadata, Mapping) else {}
    response = "".join(str(m.get("content", "")) for m in messages if m.get("role") == "assistant")
    prompt = [dict(m) for m in messages if m.get("role") != "assistant"]
    found, label = row_value(meta, label_key)
    source = meta.get("data_source")
    extra = meta.get("extra_info")
    state = RolloutState(
        message=prompt,
        response=response,
        reward_model={"ground_truth": label},
        data_source=source if isinstance(source, (str, dict)) else None,
        status=Status.COMPLETED,
        extra_fields={"extra_info": dict(extra)} if isinstance(extra, Mapping) else {},
    )
    if not found:
        state.status = Status.FAILED
        state.error_msg = (
            f"NeMo-RL environment: the sample's metadata has no {label_key!r} (keys: {sorted(meta)}); "
            "set label_key in the env config"
        )
    return state


class JudgerEnvironmentImpl:
    """The environment's methods; :data:`JudgerEnvironment` runs them as a Ray actor."""

    def __init__(self, cfg: Mapping[str, Any] | None = None) -> None:
        cfg = check_config(cfg)
        self.label_key = str(cfg.get("label_key") or DEFAULT_LABEL_KEY)
        self.scorer = Scorer(
            cfg.get("config"), failure_reward=cfg.get("failure_reward", "lowest"), name="NeMo-RL environment"
        )
        self.scorer.judger  # noqa: B018 - build now: a wrong config fails the actor's start, not a step
        self._counts = [0, 0]  # judged, failed since the last metrics
        self._lock = threading.Lock()

    def step(self, message_log_batch: list[Any], metadata: list[Any]) -> Any:
        import torch

        states = [
            conversation_state(log, meta, self.label_key) for log, meta in zip(message_log_batch, metadata)
        ]
        outcomes = self.scorer.score_sync(states)
        with self._lock:
            self._counts[0] += len(outcomes)
            self._counts[1] += sum(o.failed for o in outcomes)
        return _return_type()(
            observations=[_observation(o) for o in outcomes],
            metadata=[_metadata(meta, o) for meta, o in zip(metadata, outcomes)],
            next_stop_strings=[None] * len(outcomes),
            rewards=torch.tensor([o.score for o in outcomes], dtype=torch.float32),
            terminateds=torch.ones(len(outcomes), dtype=torch.float32),
            answers=[_answer(o) for o in outcomes],
        )

    def global_post_process_and_metrics(self, batch: Any) -> tuple[Any, dict[str, float]]:
        rewards = batch["rewards"].float()
        if "is_end" in batch:
            rewards = rewards * batch["is_end"].float()
        with self._lock:
            judged, failed = self._counts
            self._counts = [0, 0]
        metrics = {
            "accuracy": float(rewards.mean().item()) if rewards.numel() else 0.0,
            FAILED_KEY: failed / judged if judged else 0.0,
        }
        return batch, metrics

    def shutdown(self) -> None:
        self.scorer.judger.close()


def _observation(outcome: Outcome) -> dict[str, str]:
    if outcome.failed:
        return {"role": "environment", "content": "Environment: judge failed"}
    acc = outcome.reward.get("acc") if outcome.reward else None
    correct = bool(acc) if acc is not None else outcome.score >= 1.0
    return {"role": "environment", "content": "Environment: correct" if correct else "Environment: incorrect"}


def _metadata(meta: Any, outcome: Outcome) -> Any:
    out = dict(meta) if isinstance(meta, Mapping) else {}
    out[FAILED_KEY] = outcome.failed
    out[FAILURE_KEY] = outcome.failure
    return out


def _answer(outcome: Outcome) -> str | None:
    pred = outcome.reward.get("pred") if outcome.reward else None
    return None if pred is None else str(pred)


JudgerEnvironment = ray.remote(max_restarts=-1, max_task_retries=-1, max_concurrency=64)(  # type: ignore[call-overload]
    JudgerEnvironmentImpl
)
"""The Ray actor class NeMo-RL makes an environment from (``create_env``: ``.options(...).remote(cfg)``)."""


def register(name: str = "judger") -> None:
    """Make ``name`` an environment NeMo-RL can build: ``register_env(name, FQN)`` and the actor's
    Python in ``ACTOR_ENVIRONMENT_REGISTRY`` (NeMo-RL's own, ``PY_EXECUTABLES.SYSTEM``: judger is
    installed where NeMo-RL runs). Calling it again for the same name does nothing; a name another
    environment holds is refused, by NeMo-RL."""
    from nemo_rl.distributed.ray_actor_environment_registry import ACTOR_ENVIRONMENT_REGISTRY
    from nemo_rl.distributed.virtual_cluster import PY_EXECUTABLES
    from nemo_rl.environments.utils import ENV_REGISTRY, register_env

    ACTOR_ENVIRONMENT_REGISTRY.setdefault(FQN, PY_EXECUTABLES.SYSTEM)
    if ENV_REGISTRY.get(name, {}).get("actor_class_fqn") != FQN:
        register_env(name, FQN)
