"""verl-style reward managers without torch: decoded responses in, token-level reward arrays out.

A manager is called with a batch (a :class:`RewardBatch`, or a mapping with the same keys) and
returns a ``(batch, response_length)`` float32 NumPy array holding each sample's score at its last
valid token and zeros elsewhere (a torch tensor with ``tensor="torch"``, when torch is installed).
``return_dict=True`` returns ``{"reward_tensor": ..., "reward_extra_info": {key: [value per sample]}}``
where the keys are the union over the batch (a sample without a key has None, never a KeyError).

``compute_score`` is verl's ``compute_score(data_source, solution_str, ground_truth, extra_info,
**kwargs)`` (its batch form for :class:`BatchRewardManager`), or a judger / judger config: then the
batch goes through ``batch_judge``, a sample that fails to be judged scores 0.0 and its
``judge_failure`` entry says ``"error"`` or ``"timeout"``. ``None`` means verl's dispatch by
data_source (:mod:`judger.compat.verl`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from judger.compat.verl.batch import overlong_penalty, run_sync
from judger.compat.verl.compute_score import default_compute_score
from judger.core.judger import BaseJudger
from judger.core.rollout import RolloutState, Status

ScoreFn = Callable[..., Any]


@dataclass
class RewardBatch:
    """What a reward manager needs of a batch, one entry per sample.

    ``responses`` are decoded texts; give ``response_ids`` (rows of token ids) and a tokenizer to the
    manager instead to have them decoded. ``valid_response_lengths`` are the numbers of real response
    tokens; ``response_length`` (the width of the reward array) defaults to the longest of them.
    """

    data_sources: Sequence[Any]
    ground_truths: Sequence[Any]
    valid_response_lengths: Sequence[int]
    responses: Sequence[str] | None = None
    response_ids: Sequence[Sequence[int]] | None = None
    extra_infos: Sequence[dict[str, Any] | None] | None = None
    prompts: Sequence[str] | None = None
    response_length: int | None = None

    def __len__(self) -> int:
        return len(self.data_sources)

    @classmethod
    def coerce(cls, batch: RewardBatch | Mapping[str, Any]) -> RewardBatch:
        if isinstance(batch, RewardBatch):
            return batch
        data = dict(batch)
        if "ground_truths" not in data and "reward_model" in data:
            # verl's non_tensor_batch carries reward_model dicts
            data["ground_truths"] = [
                rm.get("ground_truth") if rm else None for rm in data.pop("reward_model")
            ]
        if "data_sources" not in data and "data_source" in data:
            data["data_sources"] = data.pop("data_source")
        if "extra_infos" not in data and "extra_info" in data:
            data["extra_infos"] = data.pop("extra_info")
        known = set(cls.__dataclass_fields__)
        unknown = set(data) - known
        if unknown:
            raise KeyError(f"unknown reward batch keys {sorted(unknown)}; expected some of {sorted(known)}")
        return cls(**data)


def normalize_score(result: Any) -> dict[str, Any]:
    """verl's return convention: a dict (must hold ``score``), a number, or a tuple led by the score."""
    if isinstance(result, Mapping):
        if "score" not in result:
            raise KeyError(f"compute_score returned a dict without 'score' (keys: {sorted(result)})")
        return dict(result)
    if isinstance(result, tuple):
        result = result[0]
    if hasattr(result, "item"):
        result = result.item()
    if isinstance(result, (bool, int, float)):
        return {"score": float(result)}
    raise TypeError(f"compute_score returned {type(result).__name__}; return a float or a dict with 'score'")


def union_extra_info(results: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """``{key: [value of sample i, or None]}`` over the union of keys, in first-seen order."""
    keys: dict[str, None] = {}
    for result in results:
        keys.update(dict.fromkeys(result))
    return {key: [result.get(key) for result in results] for key in keys}


def _default_compute_score() -> ScoreFn:
    return default_compute_score


class NaiveRewardManager:
    """Score each sample with ``compute_score`` and put the score at its last valid token (verl's naive)."""

    batched = False

    def __init__(
        self,
        compute_score: ScoreFn | BaseJudger | Any | None = None,
        *verl_positional: Any,
        tokenizer: Any = None,
        num_examine: int = 0,
        reward_kwargs: dict[str, Any] | None = None,
        tensor: str = "numpy",
        printer: Callable[[str], None] = print,
    ) -> None:
        if tensor not in ("numpy", "torch"):
            raise ValueError(f"tensor must be 'numpy' or 'torch', got {tensor!r}")
        if tensor == "torch":
            try:
                import torch  # noqa: F401
            except ImportError as exc:
                raise ImportError(
                    "tensor='torch' needs torch installed; use the default tensor='numpy'"
                ) from exc
        if verl_positional or (hasattr(compute_score, "decode") and hasattr(compute_score, "batch_decode")):
            raise TypeError(
                f"{type(self).__name__}: the first argument is a tokenizer: this torch-free manager takes "
                "compute_score first (tokenizer= by keyword). For verl's signature "
                "(tokenizer, num_examine, compute_score, ...) and DataProto batches use "
                f"judger.compat.verl.managers.{type(self).__name__.replace('Dapo', 'DAPO')}"
            )
        self.judger: BaseJudger | None = None
        self.compute_score: ScoreFn | None = None
        if compute_score is None:
            self.compute_score = _default_compute_score()
        elif isinstance(compute_score, BaseJudger):
            self.judger = compute_score
        elif hasattr(compute_score, "build") and not callable(compute_score):
            self.judger = compute_score.build()
        elif callable(compute_score):
            self.compute_score = compute_score
        else:
            raise TypeError(
                f"compute_score must be a function, a judger or a judger config, got {compute_score!r}"
            )
        self.tokenizer = tokenizer
        self.num_examine = num_examine
        self.reward_kwargs = dict(reward_kwargs or {})
        self.tensor = tensor
        self.printer = printer

    # --- hooks for subclasses --------------------------------------------------------------------

    def decode(self, batch: RewardBatch) -> list[str]:
        if batch.responses is not None:
            return [r if r is not None else "" for r in batch.responses]
        if batch.response_ids is None or self.tokenizer is None:
            raise ValueError(
                "the batch has no decoded responses: give responses, or response_ids and a tokenizer"
            )
        return [
            self.tokenizer.decode(list(ids)[: int(n)], skip_special_tokens=True)
            for ids, n in zip(batch.response_ids, batch.valid_response_lengths)
        ]

    def score_all(self, batch: RewardBatch, responses: list[str]) -> list[dict[str, Any]]:
        extra_infos = list(batch.extra_infos) if batch.extra_infos is not None else [None] * len(batch)
        if self.judger is not None:
            return self._judge(batch, responses, extra_infos)
        assert self.compute_score is not None
        return [
            normalize_score(self.compute_score(ds, resp, gt, info, **self.reward_kwargs))
            for ds, resp, gt, info in zip(batch.data_sources, responses, batch.ground_truths, extra_infos)
        ]

    def adjust(self, batch: RewardBatch, results: list[dict[str, Any]]) -> list[float]:
        """The reward of each sample (its score here; DAPO adds the overlong penalty)."""
        return [float(r["score"]) for r in results]

    # --- the call --------------------------------------------------------------------------------

    def _judge(
        self, batch: RewardBatch, responses: list[str], extra_infos: list[Any]
    ) -> list[dict[str, Any]]:
        assert self.judger is not None
        states = []
        for ds, resp, gt, info in zip(batch.data_sources, responses, batch.ground_truths, extra_infos):
            extra = {"extra_info": info} if info else {}
            states.append(
                RolloutState(
                    data_source=ds,
                    response=resp,
                    reward_model={"ground_truth": gt},
                    status=Status.COMPLETED,
                    extra_fields=extra,
                )
            )
        run_sync(self.judger.batch_judge(states))
        results = []
        for state in states:
            if state.reward is None:
                failure = state.extra_fields.get("judge_failure") or {}
                results.append({"score": 0.0, "judge_failure": failure.get("kind", "error")})
            else:
                results.append({**state.reward, "judge_failure": None})
        return results

    def __call__(self, batch: RewardBatch | Mapping[str, Any], return_dict: bool = False) -> Any:
        batch = RewardBatch.coerce(batch)
        n = len(batch)
        lengths = np.asarray(batch.valid_response_lengths, dtype=np.int64).reshape(-1)
        if len(lengths) != n or len(batch.ground_truths) != n:
            raise ValueError(
                f"reward batch: {n} data_sources, {len(batch.ground_truths)} ground_truths, "
                f"{len(lengths)} valid_response_lengths"
            )
        width = batch.response_length if batch.response_length is not None else int(lengths.max(initial=0))
        if (lengths > width).any():
            raise ValueError(f"a valid_response_length exceeds the response length {width}")
        responses = self.decode(batch)
        if len(responses) != n:
            raise ValueError(f"reward batch: {len(responses)} responses for {n} samples")
        results = self.score_all(batch, responses)
        rewards = self.adjust(batch, results)
        reward_tensor = np.zeros((n, width), dtype=np.float32)
        rows = np.flatnonzero(lengths > 0)
        # verl writes at valid_response_length - 1; an empty response has no token to carry a reward
        reward_tensor[rows, lengths[rows] - 1] = np.asarray(rewards, dtype=np.float32)[rows]
        self._examine(batch, responses, rewards)
        tensor: Any = reward_tensor
        if self.tensor == "torch":
            import torch

            tensor = torch.from_numpy(reward_tensor)
        if return_dict:
            return {"reward_tensor": tensor, "reward_extra_info": union_extra_info(results)}
        return tensor

    def _examine(self, batch: RewardBatch, responses: list[str], rewards: list[float]) -> None:
        if self.num_examine <= 0:
            return
        printed: dict[Any, int] = {}
        for i, ds in enumerate(batch.data_sources):
            key = str(ds)
            if printed.get(key, 0) >= self.num_examine:
                continue
            printed[key] = printed.get(key, 0) + 1
            if batch.prompts is not None:
                self.printer(f"[prompt] {batch.prompts[i]}")
            self.printer(f"[response] {responses[i]}")
            self.printer(f"[ground_truth] {batch.ground_truths[i]}")
            self.printer(f"[score] {rewards[i]}")


class BatchRewardManager(NaiveRewardManager):
    """One ``compute_score(data_sources, solution_strs, ground_truths, extra_infos, **kw)`` call per batch."""

    batched = True

    def score_all(self, batch: RewardBatch, responses: list[str]) -> list[dict[str, Any]]:
        if self.judger is not None:
            return super().score_all(batch, responses)
        assert self.compute_score is not None
        extra_infos = list(batch.extra_infos) if batch.extra_infos is not None else [None] * len(batch)
        results = self.compute_score(
            list(batch.data_sources), responses, list(batch.ground_truths), extra_infos, **self.reward_kwargs
        )
        if not isinstance(results, (list, tuple)) or len(results) != len(batch):
            got = len(results) if isinstance(results, (list, tuple)) else type(results).__name__
            raise ValueError(f"batch compute_score returned {got} results for {len(batch)} samples")
        return [normalize_score(r) for r in results]


class DapoRewardManager(NaiveRewardManager):
    """verl's DAPO manager: strip a trailing eos from each response, then add the overlong penalty.

    With ``overlong_buffer_len`` set, a response of L valid tokens gets
    ``min(-(L - (max_resp_len - overlong_buffer_len)) / overlong_buffer_len * overlong_penalty_factor, 0)``
    added to its score; ``log_overlong`` records ``overlong_reward`` and ``overlong`` per sample.
    """

    def __init__(
        self,
        compute_score: ScoreFn | BaseJudger | Any | None = None,
        *,
        eos_token: str | None = None,
        max_resp_len: int | None = None,
        overlong_buffer_len: int | None = None,
        overlong_penalty_factor: float = 1.0,
        log_overlong: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(compute_score, **kwargs)
        if eos_token is None and self.tokenizer is not None:
            eos_token = getattr(self.tokenizer, "eos_token", None)
        self.eos_token = eos_token
        if overlong_buffer_len is not None:
            if max_resp_len is None:
                raise ValueError("overlong_buffer_len needs max_resp_len")
            if not 0 < overlong_buffer_len <= max_resp_len:
                raise ValueError(
                    f"overlong_buffer_len must be in (0, max_resp_len], got {overlong_buffer_len}"
                )
        self.max_resp_len = max_resp_len
        self.overlong_buffer_len = overlong_buffer_len
        self.overlong_penalty_factor = overlong_penalty_factor
        self.log_overlong = log_overlong

    def decode(self, batch: RewardBatch) -> list[str]:
        responses = super().decode(batch)
        eos = self.eos_token
        if eos:
            responses = [r[: -len(eos)] if r.endswith(eos) else r for r in responses]
        return responses

    def adjust(self, batch: RewardBatch, results: list[dict[str, Any]]) -> list[float]:
        rewards = super().adjust(batch, results)
        if self.overlong_buffer_len is None:
            return rewards
        assert self.max_resp_len is not None
        for i, length in enumerate(batch.valid_response_lengths):
            penalty = overlong_penalty(
                int(length), self.max_resp_len, self.overlong_buffer_len, self.overlong_penalty_factor
            )
            rewards[i] += penalty
            if self.log_overlong:
                results[i]["overlong_reward"] = penalty
                results[i]["overlong"] = penalty < 0
        return rewards
