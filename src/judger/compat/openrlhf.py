"""OpenRLHF's reward file backed by a judger: point ``--reward.remote_url`` at a ``.py`` file.

    # reward.py, given as --reward.remote_url /path/to/reward.py (JUDGER_CONFIG=math in the environment)
    from judger.compat.openrlhf import reward_func

    # or your own judger: reward_func = make_reward_func("path/to/config.py:NAME")

OpenRLHF (0.11.2, ``openrlhf/utils/agent.py``) loads the file with ``spec_from_file_location`` and
calls its ``reward_func(queries, prompts, labels)`` from a worker thread, one query per call; a
query is ``decode(prompt_ids + response_ids, skip_special_tokens=False)``. It reads ``rewards``,
``scores`` and ``extra_logs`` from the returned dict; an exception leaves the sample's reward None,
and the step crashes on it (``experience_maker.py``: ``Experience.rewards`` is None). The function:

- reads the response as what follows the prompt in the query, with its special-token text removed
  (:mod:`judger.compat.special_tokens`; ``$JUDGER_TOKENIZER`` names the policy's tokenizer
  directory); a query that does not start with its prompt (OpenRLHF truncates long prompts from the
  left) fails, never judged with the prompt as part of the answer;
- takes the label as given (``""``, OpenRLHF's value for a prompt without one, is no label);
- returns a number for every query: the judger's score, or the failure reward (default: the
  judger's lowest score) with ``extra_logs["judge_failed"]`` 1.0 and the reason logged;
  ``extra_logs`` holds the same keys for every query (``judge_failed`` and ``acc``), as OpenRLHF
  stacks them across a step. Never an exception.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from judger.compat.scoring import FAILED_KEY, Scorer
from judger.compat.special_tokens import remove_texts, texts_for
from judger.core.failure_reward import LOWEST, FailureRewardSetting
from judger.core.rollout import RolloutState, Status

LOG_KEYS = ("acc",)
PROMPT_NOT_FOUND = (
    "the query does not start with its prompt (OpenRLHF truncated the prompt from the left, or the "
    "tokenizer does not decode it back as sent): the response cannot be told apart from the prompt"
)


class OpenRLHFReward:
    """OpenRLHF's ``reward_func`` over a judger (see the module docstring)."""

    def __init__(
        self,
        source: Any = None,
        *,
        failure_reward: FailureRewardSetting = LOWEST,
        strip: Sequence[str] | None = None,
        tokenizer: str | None = None,
        log_keys: Sequence[str] = LOG_KEYS,
    ) -> None:
        self.scorer = Scorer(source, failure_reward=failure_reward, name="OpenRLHF reward_func")
        self.strip = None if strip is None else tuple(strip)
        self.tokenizer = tokenizer
        self.log_keys = tuple(dict.fromkeys(k for k in log_keys if k not in ("score", FAILED_KEY)))
        self.__name__ = "reward_func"

    def state(self, query: str, prompt: str | None, label: Any) -> RolloutState:
        response: str | None = query
        if prompt:
            response = query[len(prompt) :] if query.startswith(prompt) else None
        state = RolloutState(
            message=[{"role": "user", "content": prompt}] if prompt else [],
            response=remove_texts(
                response if response is not None else query, texts_for(self.strip, self.tokenizer)
            ),
            reward_model={"ground_truth": None if label == "" else label},
            status=Status.COMPLETED,
        )
        if response is None:
            state.status = Status.FAILED
            state.error_msg = PROMPT_NOT_FOUND
        return state

    def __call__(
        self, queries: Sequence[str], prompts: Sequence[str] | None, labels: Sequence[Any] | None, **_: Any
    ) -> dict[str, Any]:
        states = [
            self.state(
                str(query),
                prompts[i] if prompts is not None and i < len(prompts) else None,
                labels[i] if labels is not None and i < len(labels) else None,
            )
            for i, query in enumerate(queries)
        ]
        outcomes = self.scorer.score_sync(states)
        rewards = [o.score for o in outcomes]
        logs = {key: [o.number(key) for o in outcomes] for key in (*self.log_keys, FAILED_KEY)}
        return {"rewards": rewards, "scores": list(rewards), "extra_logs": logs}

    def __repr__(self) -> str:
        return f"OpenRLHFReward({self.scorer.source.describe()!r})"


def make_reward_func(
    source: Any = None,
    *,
    failure_reward: FailureRewardSetting = LOWEST,
    strip: Sequence[str] | None = None,
    tokenizer: str | None = None,
    log_keys: Sequence[str] = LOG_KEYS,
) -> OpenRLHFReward:
    """An OpenRLHF ``reward_func`` judging with ``source`` (a preset name, a config, a file or module
    spec; None: ``$JUDGER_CONFIG``); ``log_keys``: the reward fields logged in ``extra_logs``."""
    return OpenRLHFReward(
        source, failure_reward=failure_reward, strip=strip, tokenizer=tokenizer, log_keys=log_keys
    )


reward_func = OpenRLHFReward()
"""The judger named by ``$JUDGER_CONFIG``."""
