"""verl's legacy ``DataProto`` call (a reward tensor on the batch's device) and a torch-free
:class:`~judger.compat.verl.reward_managers.RewardBatch` (a NumPy array): both reduced to rows,
lengths and a width, scored and written by one :meth:`TensorCall._rewards`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from judger.compat.verl.batch import Row
from judger.compat.verl.managers.core import ManagerCore
from judger.compat.verl.reward_managers import RewardBatch, decode_all, reward_array, union_extra_info


def _valid_lengths(mask: Any) -> np.ndarray:
    """Each row's sum of the response part of the attention mask: in numpy for a mask in host
    memory (faster than torch's reduction of an int64 mask), on its device otherwise."""
    if mask.device.type == "cpu":
        return mask.numpy().sum(axis=1)
    return mask.sum(dim=-1).cpu().numpy()


class TensorCall(ManagerCore):
    """A manager called on a whole batch: ``manager(data, return_dict=False)``."""

    def __call__(self, data: Any, return_dict: bool = False) -> Any:
        """verl's legacy manager call: a ``DataProto`` in, the reward tensor (and extra info) out; or
        a :class:`RewardBatch` (or mapping) in, a NumPy array out (torch with ``tensor="torch"``)."""
        if not hasattr(data, "non_tensor_batch"):
            batch = RewardBatch.coerce(data)
            lengths, width = batch.checked_lengths()
            rows = self._batch_rows(batch)
            return self._rewards(rows, lengths, width, batch.prompts, self._as_tensor, return_dict)
        if "rm_scores" in data.batch.keys():  # noqa: SIM118 - TensorDict refuses `in`
            scores = data.batch["rm_scores"]
            if not return_dict:
                return scores
            keys = data.meta_info.get("reward_extra_keys", [])
            return {"reward_tensor": scores, "reward_extra_info": {k: data.non_tensor_batch[k] for k in keys}}
        import torch

        rows, lengths = self._rows(data)
        responses = data.batch["responses"]

        def on_device(array: np.ndarray) -> Any:
            tensor = torch.from_numpy(array)
            return tensor if tensor.device == responses.device else tensor.to(responses.device)

        return self._rewards(rows, lengths, responses.shape[-1], None, on_device, return_dict)

    def _rows(self, data: Any) -> tuple[list[Row], np.ndarray]:
        """Every row of a ``DataProto`` at once: valid lengths from the attention mask in one
        reduction, all responses in one ``batch_decode`` (slicing the batch row by row and decoding
        each was most of a step's time); the same rows verl's managers make one by one."""
        responses = data.batch["responses"]
        width = responses.shape[-1]
        lengths = _valid_lengths(data.batch["attention_mask"][:, -width:])
        # rows as arrays: transformers checks a list of Python ints element by element before
        # decoding it, which cost more than the decoding itself
        array = responses.detach().cpu().numpy()
        texts = decode_all(self.tokenizer, [array[i, :n] for i, n in enumerate(lengths.tolist())])
        columns = data.non_tensor_batch
        n = len(texts)
        sources = columns[self.reward_fn_key]
        models = columns.get("reward_model", [None] * n)
        extras = self.extra_infos(columns, n)
        strip = self.strip
        rows = [
            (sources[i], strip(texts[i]), (models[i] or {}).get("ground_truth"), extras[i]) for i in range(n)
        ]
        return rows, lengths

    def _batch_rows(self, batch: RewardBatch) -> list[Row]:
        texts = batch.texts(self.tokenizer)
        infos = list(batch.extra_infos) if batch.extra_infos is not None else [None] * len(batch)
        strip = self.strip
        return [
            (ds, strip(text), gt, info)
            for ds, text, gt, info in zip(batch.data_sources, texts, batch.ground_truths, infos)
        ]

    def _as_tensor(self, array: np.ndarray) -> Any:
        if self.tensor == "torch":
            import torch

            return torch.from_numpy(array)
        return array

    def _rewards(
        self,
        rows: Sequence[Row],
        lengths: np.ndarray,
        width: int,
        prompts: Sequence[str] | None,
        tensor_of: Callable[[np.ndarray], Any],
        return_dict: bool,
    ) -> Any:
        """The rows scored: each reward at its last valid token of a ``width``-wide array (made a
        tensor by ``tensor_of``), with verl's ``reward_extra_info`` when ``return_dict``."""
        results = self._score(rows, lengths)
        rewards = [reward for reward, _ in results]
        tensor = tensor_of(reward_array(lengths, rewards, width))
        self._examine(rows, rewards, prompts)
        if not return_dict:
            return tensor
        return {"reward_tensor": tensor, "reward_extra_info": union_extra_info([info for _, info in results])}

    def _examine(self, rows: Sequence[Row], rewards: Sequence[float], prompts: Sequence[str] | None) -> None:
        """verl's ``num_examine``: the first samples of each data source, printed."""
        if self.num_examine <= 0:
            return
        printed: dict[str, int] = {}
        for i, (source, text, truth, _) in enumerate(rows):
            key = str(source)
            if printed.get(key, 0) >= self.num_examine:
                continue
            printed[key] = printed.get(key, 0) + 1
            if prompts is not None:
                self.printer(f"[prompt] {prompts[i]}")
            self.printer(f"[response] {text}")
            self.printer(f"[ground_truth] {truth}")
            self.printer(f"[score] {rewards[i]}")
