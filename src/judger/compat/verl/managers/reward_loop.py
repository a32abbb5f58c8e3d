"""verl 0.9's reward loop: ``run_single`` per sample, the concurrent calls of one chunk decoded
and judged as one batch; ``assemble_rm_scores`` for verl's driver."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from judger.compat.verl.batch import score_rows
from judger.compat.verl.managers.core import ManagerCore
from judger.compat.verl.reward_managers import decode_all


class RewardLoop(ManagerCore):
    """A manager's reward-loop calls (``run_single``, ``assemble_rm_scores``)."""

    def _undecoded_row(self, item: Any) -> tuple[tuple[Any, np.ndarray, Any, Any], int]:
        """One sample of verl's reward loop, its response still token ids (decoded with the others
        of its chunk): ``(data_source, valid response ids, ground_truth, extra_info)`` and length."""
        response_ids = item.batch["responses"]
        width = response_ids.shape[-1]
        length = int(item.batch["attention_mask"][-width:].sum())
        ids = response_ids[:length]
        fields = item.non_tensor_batch
        rm = fields.get("reward_model") or {}
        host = ids.cpu().numpy() if hasattr(ids, "cpu") else np.asarray(ids)
        return (fields[self.reward_fn_key], host, rm.get("ground_truth"), self.extra_info(fields)), length

    async def run_single(self, data: Any) -> dict[str, Any]:
        """verl's reward-loop call for one sample; concurrent calls are decoded and judged as one batch."""
        row, length = self._undecoded_row(data[-1:][0])
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._pending.append(((row, length), future))
        if len(self._pending) == 1:
            # the other run_single calls of verl's chunk are already scheduled: flush after them
            loop.call_soon(lambda: asyncio.ensure_future(self._flush()))
        reward, info = await future
        return {"reward_score": reward, "reward_extra_info": info}

    async def _flush(self) -> None:
        pending, self._pending = self._pending, []
        try:
            undecoded = [p[0][0] for p in pending]
            texts = decode_all(self.tokenizer, [ids for _, ids, _, _ in undecoded])
            rows = [(ds, self.strip(text), gt, extra) for (ds, _, gt, extra), text in zip(undecoded, texts)]
            states = await score_rows(self.judger, rows)
            results = self._finish(states, [p[0][1] for p in pending])
        except BaseException as exc:
            for _, future in pending:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), result in zip(pending, results):
            if not future.done():
                future.set_result(result)

    @classmethod
    def assemble_rm_scores(cls, data: Any, scores: list[float]) -> Any:
        """verl's ``RewardManagerBase.assemble_rm_scores``: each score at the last valid response token."""
        import torch

        prompt_length = data.batch["prompts"].size(1)
        valid = data.batch["attention_mask"][:, prompt_length:].sum(dim=1)
        rm_scores = torch.zeros_like(data.batch["responses"], dtype=torch.float32)
        rm_scores[torch.arange(rm_scores.size(0), device=rm_scores.device), valid - 1] = rm_scores.new_tensor(
            scores
        )
        return rm_scores
