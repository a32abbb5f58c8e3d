"""slime's custom reward backed by a judger: ``--custom-rm-path judger.compat.slime.reward``.

    JUDGER_CONFIG=math python train.py ... --custom-rm-path judger.compat.slime.reward
    # a dict reward (judge_failed, pred, ...) with --reward-key score; --group-rm works too

slime (624b824, ``slime/rollout/rm_hub/__init__.py``) awaits ``fn(args, sample)`` for one ``Sample``
and ``fn(args, samples)`` for a list (``--group-rm``, or a generate function that returns several);
an exception ends the rollout. The function here judges the ``Sample``'s ``response`` against its
``label``, with its ``prompt`` (a string or chat messages) as the question and its ``metadata``
(the dataset's extra fields) as ``extra_info`` and ``data_source``. It returns, per sample:

- with ``--reward-key`` unset: the judger's score, a float;
- with ``--reward-key KEY``: the judger's reward dict plus ``judge_failed`` (slime reads
  ``reward[KEY]``; ``score`` is always there);
- for a sample the judger fails on: the failure reward (default the judger's lowest score), in a dict
  also ``judge_failed`` 1.0 and ``judge_failure`` (the reason), which is also logged. Never an
  exception.

A list gets a list in its order. ``make_reward(source)`` builds the same function over another judger
for a one-line module of your own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from judger.compat.scoring import Outcome, Scorer
from judger.core.errors import ConfigError
from judger.core.failure_reward import LOWEST, FailureRewardSetting
from judger.core.rollout import RolloutState, Status


def prompt_messages(prompt: Any) -> list[dict[str, Any]]:
    """slime's ``Sample.prompt`` (a string, or chat messages) as the state's message."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}] if prompt else []
    if isinstance(prompt, Sequence):
        return [dict(m) for m in prompt if isinstance(m, Mapping)]
    return []


def sample_state(prompt: Any, response: Any, label: Any, metadata: Any = None) -> RolloutState:
    """One slime sample (its ``prompt``, ``response``, ``label`` and ``metadata``) as a state."""
    metadata = dict(metadata) if isinstance(metadata, Mapping) else {}
    source = metadata.get("data_source")
    return RolloutState(
        message=prompt_messages(prompt),
        response=response if response is None or isinstance(response, str) else str(response),
        reward_model={"ground_truth": label},
        data_source=source if isinstance(source, (str, dict)) else None,
        status=Status.COMPLETED,
        extra_fields={"extra_info": metadata} if metadata else {},
    )


class SlimeReward:
    """slime's ``--custom-rm-path`` function over a judger (see the module docstring)."""

    def __init__(self, source: Any = None, *, failure_reward: FailureRewardSetting = LOWEST) -> None:
        self.scorer = Scorer(source, failure_reward=failure_reward, name="slime custom reward")
        self.__name__ = "reward"

    def _value(self, outcome: Outcome, reward_key: str | None) -> float | dict[str, Any]:
        if not reward_key:
            return outcome.score
        reward = outcome.reward_dict()
        if reward_key not in reward:
            if outcome.failed:  # slime reads reward[reward_key]: the failure's number is there too
                reward[reward_key] = outcome.score
            else:
                raise ConfigError(
                    f"--reward-key {reward_key!r}: judger {self.scorer.judger.judger_name!r} writes no such "
                    f"reward field (it writes {sorted(reward)}); use --reward-key score"
                )
        return reward

    async def __call__(self, args: Any, sample_or_samples: Any, **kwargs: Any) -> Any:
        many = isinstance(sample_or_samples, (list, tuple))
        samples = list(sample_or_samples) if many else [sample_or_samples]
        states = [
            sample_state(
                getattr(s, "prompt", ""), getattr(s, "response", None), getattr(s, "label", None),
                getattr(s, "metadata", None),
            )
            for s in samples
        ]  # fmt: skip
        outcomes = await self.scorer.score(states)
        reward_key = getattr(args, "reward_key", None)
        values = [self._value(o, reward_key) for o in outcomes]
        return values if many else values[0]

    def __repr__(self) -> str:
        return f"SlimeReward({self.scorer.source.describe()!r})"


def make_reward(source: Any = None, *, failure_reward: FailureRewardSetting = LOWEST) -> SlimeReward:
    """slime's custom reward judging with ``source`` (a preset name, a config, a file or module
    spec; None: ``$JUDGER_CONFIG``)."""
    return SlimeReward(source, failure_reward=failure_reward)


reward = SlimeReward()
"""The judger named by ``$JUDGER_CONFIG``."""
