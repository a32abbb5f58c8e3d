"""A ROLL reward worker backed by a judger: ``judger.compat.roll.JudgerRewardWorker``.

    # ROLL's YAML
    rewards:
      math:
        worker_cls: judger.compat.roll.JudgerRewardWorker
        tag_included: [math]
        model_args: {model_name_or_path: ${pretrain}}    # the tokenizer the worker decodes with
        system_envs: {JUDGER_CONFIG: math}                # JUDGER_LABEL_KEY too (default ground_truth)

ROLL (8eb27cc) builds each domain's reward workers from ``rewards.<domain>.worker_cls`` (a
subclass of its ``Worker``; the reward config refuses keys it does not know, so judger's options
travel in ``system_envs``, the worker's environment) and calls ``compute_rewards(DataProto)``
(``roll/distributed/scheduler/generate_scheduler.py``), which decodes the tokens itself and returns
``token_level_rewards``, ``response_level_rewards`` and ``scores``
(``roll/pipeline/rlvr/rewards/math_rule_reward_worker.py``); an exception stops the job. Here:

- prompts and responses are decoded with the worker's tokenizer, special tokens skipped (padding
  included); the response's tokens (its ``response_mask``, else those not padding) are passed on;
- the label is ``non_tensor_batch[label_key]`` (``ground_truth``, ROLL's column), ``data_source``
  that column when the batch has it;
- ``response_level_rewards`` and ``scores`` are the judger's scores (float32; ROLL's math worker
  uses float16, which rounds a fractional score), ``token_level_rewards`` zeros shaped like the
  responses, as ROLL's rule workers return them; a sample the judger fails on gets the failure
  reward (default the judger's lowest score), and its reason is logged. Never an exception.

``JudgerRewardWorker`` subclasses ROLL's ``Worker``, so it is made when first asked for, where ROLL
is installed; :class:`JudgerRewards` is its logic and needs no ROLL.
"""

from __future__ import annotations

import os
from typing import Any

from judger.compat.scoring import Scorer
from judger.core.failure_reward import LOWEST, FailureRewardSetting
from judger.core.rollout import RolloutState, Status

LABEL_ENV = "JUDGER_LABEL_KEY"
DEFAULT_LABEL_KEY = "ground_truth"
OUTPUT_KEYS = ("token_level_rewards", "response_level_rewards", "scores")


class JudgerRewards:
    """What ``compute_rewards`` does with a batch (see the module docstring)."""

    def __init__(
        self,
        tokenizer: Any,
        source: Any = None,
        *,
        label_key: str | None = None,
        failure_reward: FailureRewardSetting = LOWEST,
    ) -> None:
        self.tokenizer = tokenizer
        self.scorer = Scorer(source, failure_reward=failure_reward, name="ROLL reward worker")
        self.label_key = label_key or os.environ.get(LABEL_ENV) or DEFAULT_LABEL_KEY

    def states(self, batch: Any, non_tensor_batch: Any) -> list[RolloutState]:
        responses = batch["responses"]
        texts = self.tokenizer.batch_decode(responses, skip_special_tokens=True)
        keys = set(batch.keys())  # a TensorDict: `in` on it is not a key test in every release
        prompts = (
            self.tokenizer.batch_decode(batch["prompts"], skip_special_tokens=True)
            if "prompts" in keys
            else [None] * len(texts)
        )
        mask = batch["response_mask"] if "response_mask" in keys else None
        pad = getattr(self.tokenizer, "pad_token_id", None)
        if self.label_key not in non_tensor_batch:
            labels: Any = None
        else:
            labels = non_tensor_batch[self.label_key]
        sources = non_tensor_batch.get("data_source") if hasattr(non_tensor_batch, "get") else None
        out = []
        for i, text in enumerate(texts):
            ids = responses[i]
            kept = ids[mask[i].bool()] if mask is not None else (ids[ids != pad] if pad is not None else ids)
            source = sources[i] if sources is not None else None
            state = RolloutState(
                message=[{"role": "user", "content": prompts[i]}] if prompts[i] is not None else [],
                response=text,
                reward_model={"ground_truth": None if labels is None else labels[i]},
                data_source=source if isinstance(source, (str, dict)) else None,
                status=Status.COMPLETED,
                response_ids=[int(t) for t in kept.tolist()],
            )
            if labels is None:
                state.status = Status.FAILED
                state.error_msg = (
                    f"ROLL reward worker: the batch has no {self.label_key!r} column "
                    f"(it has {sorted(non_tensor_batch)}); set {LABEL_ENV} in system_envs"
                )
            out.append(state)
        return out

    def tensors(self, data: Any) -> dict[str, Any]:
        """``{token_level_rewards, response_level_rewards, scores}`` for ``data`` (a DataProto)."""
        import torch

        outcomes = self.scorer.score_sync(self.states(data.batch, data.non_tensor_batch))
        scores = torch.tensor([o.score for o in outcomes], dtype=torch.float32)
        return {
            "token_level_rewards": torch.zeros_like(data.batch["responses"], dtype=torch.float32),
            "response_level_rewards": scores,
            "scores": scores.clone(),
        }


def _worker_class() -> type:
    from roll.distributed.executor.worker import Worker
    from roll.distributed.scheduler.decorator import Dispatch, register
    from roll.distributed.scheduler.protocol import DataProto
    from roll.models.model_providers import default_tokenizer_provider

    class JudgerRewardWorker(Worker):
        """ROLL's reward ``Worker`` over a judger (see :mod:`judger.compat.roll`)."""

        def __init__(self, worker_config: Any) -> None:
            super().__init__(worker_config=worker_config)
            # every worker of a reward cluster judges its own share of the data (as ROLL's rule workers)
            self.rank_info.dp_rank = self.rank_info.rank
            self.rank_info.dp_size = self.rank_info.world_size
            tokenizer = default_tokenizer_provider(model_args=self.worker_config.model_args)
            self.judger_rewards = JudgerRewards(tokenizer)
            self.judger_rewards.scorer.judger  # noqa: B018 - a wrong JUDGER_CONFIG fails the start

        @register(dispatch_mode=Dispatch.ONE_TO_ALL)
        def initialize(self, pipeline_config: Any) -> None:
            pass

        @register(dispatch_mode=Dispatch.DP_MP_COMPUTE, clear_cache=False)
        def compute_rewards(self, data: Any) -> Any:
            return DataProto.from_dict(tensors=self.judger_rewards.tensors(data))

    JudgerRewardWorker.__module__ = __name__
    return JudgerRewardWorker


def __getattr__(name: str) -> Any:
    if name == "JudgerRewardWorker":
        try:
            cls = _worker_class()
        except ImportError as exc:
            raise ImportError(f"judger.compat.roll.JudgerRewardWorker needs ROLL installed: {exc}") from exc
        globals()[name] = cls  # pickled by reference: ROLL sends the class to its Ray actors
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
