"""The token ids the data path trains on: checked on the first reply, or explicitly re-tokenized.

Training needs every sample's ``prompt_ids`` and ``response_ids``. vLLM (>= 0.10.2) and SGLang
return the ids they sampled when asked; llama.cpp's server, a strict OpenAI server and others return
text only. Such a server is found on the data path's first completed sample
(:func:`missing_training_ids`) and the run stops there, naming the fix, instead of generating and
judging every group only for ``prepare_train_data`` to skip them all as ``empty_response_ids``.

The explicit way to train from such a server is ``RolloutControllerConfig(tokenize_responses=True)``
with a local tokenizer: the response text is tokenized again (:class:`ResponseTokenizer`). Those
ids are the tokenizer's reading of the text, which need not be the tokens the server sampled, and
the server's logprobs (one per sampled token) are dropped with them: the trainer recomputes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from judger.core.rollout import RolloutState, Status
from judger.trainer.sample_params import SampleParams
from judger.trainer.tokenizer import text_ids

RESPONSE_IDS_FIX = (
    "serve the policy with a server that returns them (vLLM >= 0.10.2 answers return_token_ids, "
    "which judger sends), or set RolloutControllerConfig(tokenize_responses=True) with a local "
    "tokenizer (hf_checkpoint a local model folder) to tokenize the response text again (those ids "
    "need not be the tokens the server sampled, and its logprobs are dropped)"
)
PROMPT_IDS_FIX = (
    "set hf_checkpoint to the policy's local model folder (its tokenizer and chat template give "
    "prompt_ids), or serve it with a server that returns prompt_token_ids (vLLM >= 0.10.2)"
)


def missing_training_ids(group: Sequence[RolloutState]) -> str | None:
    """Why the first COMPLETED sample of ``group`` cannot be trained on for want of token ids (with
    the fix), or None when it has them or no sample completed (nothing to tell yet)."""
    for state in group:
        if state.status != Status.COMPLETED:
            continue
        if state.response_ids is None:
            return f"the rollout server returned no token ids for the response; {RESPONSE_IDS_FIX}"
        if not state.prompt_ids:
            return f"no prompt token ids (none from the server, no local tokenizer); {PROMPT_IDS_FIX}"
        return None
    return None


class ResponseTokenizer:
    """``tokenize(state, params)``: the ids of a response the server sent as text only, under the
    policy's own tokenizer. A reply that ended on ``stop`` with no stop strings or stop tokens asked
    ended on the tokenizer's EOS, which the text does not show: it is appended (the policy learns
    to stop); with stop strings asked, such an end cannot be told from one on a stop string."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.eos_token_id = getattr(tokenizer, "eos_token_id", None)

    def __call__(self, state: RolloutState, params: SampleParams) -> list[int]:
        ids = text_ids(self.tokenizer, state.response or "")
        ended_on_eos = state.finish_reason == "stop" and not params.stop and not params.stop_token_ids
        if ended_on_eos and self.eos_token_id is not None:
            ids.append(int(self.eos_token_id))
        return ids
