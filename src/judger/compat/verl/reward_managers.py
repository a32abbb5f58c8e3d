"""The torch-free core of judger's verl reward managers: batches, token-level reward arrays, decoding.

judger has one verl manager family, :mod:`judger.compat.verl.managers` (``NaiveRewardManager``,
``BatchRewardManager``, ``DAPORewardManager``: verl's spelling). Those classes take verl's
``DataProto`` (a torch reward tensor back) or, without torch, a :class:`RewardBatch` or a mapping
with its keys (a NumPy array back, or torch with ``tensor="torch"``); what they share without torch
lives here:

- :class:`RewardBatch`: one entry per sample (decoded ``responses``, or ``response_ids`` and the
  manager's tokenizer), ``valid_response_lengths``, ``response_length`` (the array's width).
- :func:`reward_array`: each sample's reward at its last valid token, zeros elsewhere, in one
  scatter.
- :func:`union_extra_info`: ``{key: [value per sample]}`` over the union of keys (None where a
  sample lacks one).
- :func:`decode_all`: every row of token ids decoded as ``tokenizer.decode(row,
  skip_special_tokens=True)`` decodes it, in one call of a fast tokenizer's Rust decoder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


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

    def checked_lengths(self) -> tuple[np.ndarray, int]:
        """The valid lengths as an array and the reward array's width; ValueError when the columns
        disagree in length or a valid length exceeds the width."""
        n = len(self)
        lengths = np.asarray(self.valid_response_lengths, dtype=np.int64).reshape(-1)
        if len(lengths) != n or len(self.ground_truths) != n:
            raise ValueError(
                f"reward batch: {n} data_sources, {len(self.ground_truths)} ground_truths, "
                f"{len(lengths)} valid_response_lengths"
            )
        width = self.response_length if self.response_length is not None else int(lengths.max(initial=0))
        if (lengths > width).any():
            raise ValueError(f"a valid_response_length exceeds the response length {width}")
        return lengths, width

    def texts(self, tokenizer: Any) -> list[str]:
        """The decoded responses (None as ""), or ``response_ids`` decoded with ``tokenizer``."""
        if self.responses is not None:
            texts = [r if r is not None else "" for r in self.responses]
        elif self.response_ids is None or tokenizer is None:
            raise ValueError(
                "the batch has no decoded responses: give responses, or response_ids and a tokenizer"
            )
        else:
            rows = [
                np.asarray(ids)[: int(n)] for ids, n in zip(self.response_ids, self.valid_response_lengths)
            ]
            texts = decode_all(tokenizer, rows)
        if len(texts) != len(self):
            raise ValueError(f"reward batch: {len(texts)} responses for {len(self)} samples")
        return texts


def union_extra_info(results: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """``{key: [value of sample i, or None]}`` over the union of keys, in first-seen order."""
    keys: dict[str, None] = {}
    for result in results:
        keys.update(dict.fromkeys(result))
    return {key: [result.get(key) for result in results] for key in keys}


def reward_array(lengths: np.ndarray, rewards: Sequence[float], width: int) -> np.ndarray:
    """A ``(len(lengths), width)`` float32 array: each reward at ``length - 1``, zeros elsewhere.

    verl writes at ``valid_response_length - 1``; an empty response has no token to carry a reward.
    """
    out = np.zeros((len(lengths), width), dtype=np.float32)
    rows = np.flatnonzero(lengths > 0)
    out[rows, lengths[rows] - 1] = np.asarray(rewards, dtype=np.float32)[rows]
    return out


_TRANSFORMERS_FAST = ("transformers.tokenization_utils_tokenizers", "transformers.tokenization_utils_fast")


def _plain_fast_tokenizer(tokenizer: Any) -> Any:
    """The Rust tokenizer under a transformers fast tokenizer whose ``decode`` is exactly its Rust
    ``decode`` (no override, no clean-up pass), else None."""
    backend = getattr(tokenizer, "_tokenizer", None)
    if backend is None or not hasattr(backend, "decode_batch"):
        return None
    if getattr(tokenizer, "clean_up_tokenization_spaces", True) is not False:
        return None
    for name in ("decode", "batch_decode", "_decode"):
        owner = next((c for c in type(tokenizer).__mro__ if name in vars(c)), None)
        if owner is None or not owner.__module__.startswith(("transformers.tokenization_utils",)):
            return None
        if name == "_decode" and owner.__module__ not in _TRANSFORMERS_FAST:
            return None
    return backend


def decode_all(tokenizer: Any, ids: Sequence[Any]) -> list[str]:
    """``tokenizer.decode(row, skip_special_tokens=True)`` of every row: each distinct row once (a
    GRPO group often repeats a short answer word for word, a collapsing policy many), in one Rust
    call on all cores where that is the same thing (a plain fast tokenizer), else row by row."""
    first: dict[Any, int] = {}
    where = [first.setdefault(_row_key(row), len(first)) for row in ids]
    distinct: list[Any] = list(ids) if len(first) == len(where) else [None] * len(first)
    if len(first) < len(where):
        for row, i in zip(ids, where):
            distinct[i] = row
    backend = _plain_fast_tokenizer(tokenizer)
    if backend is not None:
        rows = [row.tolist() if hasattr(row, "tolist") else list(row) for row in distinct]
        texts = list(backend.decode_batch(rows, skip_special_tokens=True))
    else:
        texts = [tokenizer.decode(row, skip_special_tokens=True) for row in distinct]
    return texts if len(first) == len(where) else [texts[i] for i in where]


def _row_key(row: Any) -> Any:
    """Equal for rows of equal token ids: a NumPy row's dtype and bytes, else a tuple of its ids."""
    if hasattr(row, "tobytes"):
        return (str(row.dtype), row.tobytes())
    return tuple(row.tolist() if hasattr(row, "tolist") else row)
