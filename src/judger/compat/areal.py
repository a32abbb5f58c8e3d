"""AReaL's reward function backed by a judger: name it in AReaL's config as it is.

    # AReaL: RLVRWorkflow(reward_fn="judger.compat.areal.reward_fn", ...), with JUDGER_CONFIG=math
    from judger.compat.areal import make_reward_fn
    reward_fn = make_reward_fn("math", label_key="answer")      # or your own, in a module of yours

AReaL (1.0.4, ``areal/workflow/rlvr.py``) calls ``reward_fn(prompt, completions, prompt_ids,
completion_ids, **row)`` once per sample through its ``AsyncRewardWrapper``, in a process pool (so
the function must pickle), with a 15 s timeout and 3 retries, after which a timeout scores 0 and an
exception fails the workflow. The function here:

- is an instance of :class:`AReaLReward` that pickles as its settings and builds its judger on first
  use in each worker process (``$JUDGER_CONFIG`` for the module's ``reward_fn``);
- removes special-token text from ``completions`` (AReaL decodes with it:
  :mod:`judger.compat.special_tokens`), never cutting the response short;
- reads the label from the row's ``label_key`` column (default ``answer``, AReaL's GSM8K column;
  ``$JUDGER_LABEL_KEY`` for ``reward_fn``; a dotted key reads a nested one), and ``data_source`` /
  ``extra_info`` columns when the row has them;
- passes ``completion_ids`` on as the response's tokens (``response_ids``: DAPO's overlong buffer
  counts them) and ``prompt_ids`` as the prompt's;
- judges within its own ``deadline`` (default 12 s, under AReaL's 15 s): a sample still unjudged
  then fails, so AReaL never retries a slow sample three times and then scores it 0;
- returns the judger's score, or for a sample the judger fails on the failure reward (default the
  judger's lowest score) with the reason logged: never an exception.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

from judger.compat.scoring import Scorer, row_value
from judger.compat.special_tokens import remove_texts, texts_for
from judger.core.failure_reward import LOWEST, FailureRewardSetting
from judger.core.rollout import RolloutState, Status

logger = logging.getLogger(__name__)

LABEL_ENV = "JUDGER_LABEL_KEY"
DEFAULT_LABEL_KEY = "answer"
AREAL_TIMEOUT = 15.0
"""AReaL's ``AsyncRewardWrapper`` timeout (``areal/api/reward_api.py``)."""
DEFAULT_DEADLINE = 12.0


class AReaLReward:
    """AReaL's ``reward_fn`` over a judger (see the module docstring); made by :func:`make_reward_fn`."""

    def __init__(
        self,
        source: Any = None,
        *,
        label_key: str | None = None,
        failure_reward: FailureRewardSetting = LOWEST,
        strip: Sequence[str] | None = None,
        tokenizer: str | None = None,
        deadline: float = DEFAULT_DEADLINE,
    ) -> None:
        if not 0 < deadline < AREAL_TIMEOUT:
            raise ValueError(
                f"deadline must be between 0 and AReaL's reward timeout ({AREAL_TIMEOUT} s), got "
                f"{deadline!r}: past it AReaL retries the sample, then scores it 0 whatever the judger says"
            )
        self.scorer = Scorer(source, failure_reward=failure_reward, name="AReaL reward_fn", deadline=deadline)
        self.label_key = label_key
        self.strip = None if strip is None else tuple(strip)
        self.tokenizer = tokenizer
        self.__name__ = "reward_fn"

    def _label_key(self) -> str:
        return self.label_key or os.environ.get(LABEL_ENV) or DEFAULT_LABEL_KEY

    def state(
        self, prompt: Any, completions: Any, prompt_ids: Any, completion_ids: Any, row: Mapping[str, Any]
    ) -> RolloutState:
        key = self._label_key()
        found, label = row_value(row, key)
        extra = row.get("extra_info")
        source = row.get("data_source")
        state = RolloutState(
            message=[{"role": "user", "content": prompt if isinstance(prompt, str) else str(prompt)}],
            response=remove_texts(str(completions), texts_for(self.strip, self.tokenizer)),
            reward_model={"ground_truth": label},
            data_source=source if isinstance(source, (str, dict)) else None,
            status=Status.COMPLETED,
            extra_fields={"extra_info": dict(extra)} if isinstance(extra, Mapping) else {},
            prompt_ids=_ids(prompt_ids),
            response_ids=_ids(completion_ids),
        )
        if not found:
            state.status = Status.FAILED
            state.error_msg = (
                f"AReaL reward_fn: the row has no {key!r} column (columns: {sorted(row)}); name the label "
                f"column with label_key= or ${LABEL_ENV}"
            )
        return state

    def __call__(
        self, prompt: Any, completions: Any, prompt_ids: Any, completion_ids: Any, **row: Any
    ) -> float:
        state = self.state(prompt, completions, prompt_ids, completion_ids, row)
        return self.scorer.score_sync([state])[0].score

    def __repr__(self) -> str:
        return f"AReaLReward({self.scorer.source.describe()!r}, label_key={self._label_key()!r})"


def _ids(ids: Any) -> list[int] | None:
    if ids is None:
        return None
    if hasattr(ids, "tolist"):
        ids = ids.tolist()
    return [int(i) for i in ids]


def make_reward_fn(
    source: Any = None,
    *,
    label_key: str | None = None,
    failure_reward: FailureRewardSetting = LOWEST,
    strip: Sequence[str] | None = None,
    tokenizer: str | None = None,
    deadline: float = DEFAULT_DEADLINE,
) -> AReaLReward:
    """An AReaL ``reward_fn`` judging with ``source`` (a preset name, a config, a file or module
    spec; None: ``$JUDGER_CONFIG``). ``label_key``: the row's label column (default ``answer``).
    ``strip``: the special-token texts to remove (default: the policy tokenizer's when ``tokenizer``
    or ``$JUDGER_TOKENIZER`` names its directory, else :data:`~judger.compat.special_tokens.
    DEFAULT_TEXTS`). ``deadline``: seconds a sample may take, under AReaL's 15 s timeout."""
    return AReaLReward(
        source,
        label_key=label_key,
        failure_reward=failure_reward,
        strip=strip,
        tokenizer=tokenizer,
        deadline=deadline,
    )


reward_fn = AReaLReward()
"""The judger named by ``$JUDGER_CONFIG``, the label in ``$JUDGER_LABEL_KEY`` (default ``answer``)."""
