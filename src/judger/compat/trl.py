"""TRL reward functions backed by a judger: pass one to ``GRPOTrainer(reward_funcs=...)`` as it is.

    from judger.compat.trl import judger_reward

    reward = judger_reward("math", failure_reward="lowest")      # a preset, a config, a judger or a URL
    trainer = GRPOTrainer(model=..., reward_funcs=[reward], train_dataset=dataset, ...)

TRL calls a reward function with ``prompts``, ``completions`` (strings, or chat message lists),
``completion_ids``, every dataset column as a keyword (one value per completion), ``trainer_state``,
``log_metric`` and ``log_extra``. The function here:

- reads the completion's text (a string, or the last assistant message's content, text parts joined)
  and its tokens (``completion_ids``, the ``response_ids`` a preset counting tokens reads);
- reads the label from ``label_key`` -- by default ``reward_model["ground_truth"]`` (verl's layout),
  then a ``ground_truth`` or ``solution`` column -- and ``data_source`` / ``extra_info`` columns when
  the dataset has them (a verl-layout dataset routes with ``judger_reward("verl")``); a GSM8K
  ``answer`` column (the worked solution ending ``#### 72``) is read as its final answer;
- judges the whole batch in one ``batch_judge`` call; its reward is the judger's ``score``;
- gives a sample judger cannot score ``failure_reward``, which the user chooses: ``"lowest"`` (the
  lowest score the judger gives that sample, so a failure never pays more than a wrong answer; 0.0
  where the judger declares none) or a number (never None: TRL would turn it into NaN and drop it
  with a generic warning), and logs the failure's message;
- logs ``<name>/acc`` (mean over the scored samples), ``<name>/failed`` (failed fraction) and
  ``<name>/failures`` (count) through TRL's ``log_metric``, and ``<name>_pred`` /
  ``<name>_failure`` columns through ``log_extra`` (TRL's completions table).

The default is an ``async`` function: TRL awaits it on its own event loop, alongside other async
reward functions. ``asynchronous=False`` gives a sync one (it runs its own event loop per call).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from judger.compat.source import resolve_judger
from judger.compat.verl.batch import FailureLog
from judger.core import loops
from judger.core.failure_reward import FailureReward, FailureRewardSetting
from judger.core.judger import BaseJudger
from judger.core.rollout import RolloutState, Status

logger = logging.getLogger(__name__)

DEFAULT_LABEL_KEYS = ("reward_model.ground_truth", "ground_truth", "solution")
TRL_ARGUMENTS = (
    "prompts",
    "completions",
    "completion_ids",
    "trainer_state",
    "log_metric",
    "log_extra",
    "environments",
)
"""What GRPOTrainer passes besides the dataset columns (docs/trainers/trl.md's table)."""
_names_taken: dict[str, int] = {}


def default_name(source: Any, judger: BaseJudger) -> str:
    """``judger_<preset>`` (``judger_gsm8k``), numbered from the second one in a process
    (``judger_gsm8k_2``): TRL logs each reward function under its name, so two functions sharing
    one would write the same series."""
    if isinstance(source, str) and not source.startswith(("http://", "https://")):
        stem = source.lower().removesuffix("judgerconfig")
    elif isinstance(source, str):
        stem = "remote"
    else:
        stem = judger.get_judger_name().lower().rsplit("/", 1)[-1]
    stem = "".join(c if c.isalnum() else "_" for c in stem).strip("_") or "reward"
    base = f"judger_{stem}"
    _names_taken[base] = count = _names_taken.get(base, 0) + 1
    return base if count == 1 else f"{base}_{count}"


def completion_text(completion: Any) -> str:
    """The text of a TRL completion: a string, or a list of chat messages (the last assistant one)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence):
        messages = [m for m in completion if isinstance(m, Mapping)]
        assistant = [m for m in messages if m.get("role") == "assistant"] or messages
        if assistant:
            content = assistant[-1].get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, Sequence):
                return "".join(
                    part.get("text", "")
                    for part in content
                    if isinstance(part, Mapping) and part.get("type") == "text"
                )
            return "" if content is None else str(content)
    raise TypeError(
        f"a TRL completion must be a string or a list of chat messages, got {type(completion).__name__}"
    )


def _lookup(columns: Mapping[str, Sequence[Any]], key: str, i: int) -> tuple[bool, Any]:
    head, _, rest = key.partition(".")
    if head not in columns:
        return False, None
    value = columns[head][i]
    for part in rest.split(".") if rest else ():
        if not isinstance(value, Mapping) or part not in value:
            return False, None
        value = value[part]
    return True, value


class JudgerReward:
    """A sync TRL reward function over a judger (see the module docstring); made by :func:`judger_reward`."""

    def __init__(
        self,
        judger: BaseJudger,
        *,
        failure_reward: FailureRewardSetting,
        label_key: str | Sequence[str] | None = None,
        name: str = "judger",
        log_metrics: bool = True,
    ) -> None:
        self.judger = judger
        self.failure_reward = FailureReward(failure_reward, judger, "failure_reward", logger)
        self.label_keys = (
            (label_key,) if isinstance(label_key, str) else tuple(label_key or DEFAULT_LABEL_KEYS)
        )
        self.name = name
        self.__name__ = name  # TRL names the reward function (and its logged reward) after __name__
        self.log_metrics = log_metrics
        self.failure_log = FailureLog(f"TRL reward {name!r}", logger)

    # --- the batch ---------------------------------------------------------------------------------

    def _label(self, columns: Mapping[str, Sequence[Any]], i: int) -> Any:
        for key in self.label_keys:
            found, value = _lookup(columns, key, i)
            if found:
                return value
        dataset_columns = sorted(k for k in columns if k not in TRL_ARGUMENTS)
        raise KeyError(
            f"judger reward: no label in the dataset row (looked for {list(self.label_keys)}; columns: "
            f"{dataset_columns}); pass label_key='<column>' or 'column.key' for a nested one"
        )

    def states(
        self, prompts: Sequence[Any], completions: Sequence[Any], columns: Mapping[str, Any]
    ) -> list[RolloutState]:
        rows = {k: v for k, v in columns.items() if k not in TRL_ARGUMENTS and isinstance(v, Sequence)}
        # the completion's tokens: a preset that counts them (DAPO's overlong buffer) reads response_ids
        ids = columns.get("completion_ids")
        out = []
        for i, completion in enumerate(completions):
            prompt = prompts[i] if i < len(prompts) else None
            message = (
                list(prompt) if isinstance(prompt, list) else [{"role": "user", "content": str(prompt or "")}]
            )
            extra = rows["extra_info"][i] if "extra_info" in rows else None
            out.append(
                RolloutState(
                    message=message,
                    response=completion_text(completion),
                    reward_model={"ground_truth": self._label(rows, i)},
                    data_source=rows["data_source"][i] if "data_source" in rows else None,
                    status=Status.COMPLETED,
                    extra_fields={"extra_info": dict(extra)} if isinstance(extra, Mapping) else {},
                    response_ids=list(ids[i]) if ids is not None and i < len(ids) else None,
                )
            )
        return out

    def rewards(self, states: Sequence[RolloutState], log_metric: Any, log_extra: Any) -> list[float]:
        rewards: list[float] = []
        accs: list[float] = []
        failed: list[str | None] = []
        for state in states:
            if state.reward is None:
                rewards.append(self.failure_reward.of(state))
                failed.append(state.error_msg or "failed")
                self.failure_log.record(state, rewards[-1])
                continue
            rewards.append(float(state.reward["score"]))
            self.failure_reward.watch(state, rewards[-1])
            failed.append(None)
            if "acc" in state.reward and state.reward["acc"] is not None:
                accs.append(float(state.reward["acc"]))
        if self.log_metrics and callable(log_metric):
            n_failed = sum(f is not None for f in failed)
            if accs:
                log_metric(f"{self.name}/acc", sum(accs) / len(accs))
            log_metric(f"{self.name}/failed", n_failed / max(1, len(states)))
            log_metric(f"{self.name}/failures", float(n_failed))
        if self.log_metrics and callable(log_extra):
            log_extra(
                f"{self.name}_pred", [None if s.reward is None else s.reward.get("pred") for s in states]
            )
            log_extra(f"{self.name}_failure", failed)
        return rewards

    async def score(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        log_metric: Any = None,
        log_extra: Any = None,
        **columns: Any,
    ) -> list[float]:
        states = self.states(prompts, completions, columns)
        await self.judger.batch_judge(states)
        return self.rewards(states, log_metric, log_extra)

    def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        log_metric: Any = None,
        log_extra: Any = None,
        **columns: Any,
    ) -> list[float]:
        return loops.run_sync(lambda: self.score(prompts, completions, log_metric, log_extra, **columns))

    def __repr__(self) -> str:
        setting = self.failure_reward.setting
        return f"{type(self).__name__}({self.judger.judger_name!r}, failure_reward={setting!r})"


class AsyncJudgerReward(JudgerReward):
    """The ``async`` form of :class:`JudgerReward`: TRL awaits it on its event loop."""

    async def __call__(  # type: ignore[override]
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        log_metric: Any = None,
        log_extra: Any = None,
        **columns: Any,
    ) -> list[float]:
        return await self.score(prompts, completions, log_metric, log_extra, **columns)


def judger_reward(
    source: Any,
    *,
    failure_reward: FailureRewardSetting,
    label_key: str | Sequence[str] | None = None,
    name: str | None = None,
    asynchronous: bool = True,
    log_metrics: bool = True,
) -> JudgerReward:
    """A TRL reward function judging with ``source`` (a judger, a judger config, a preset name such as
    ``"math"``, ``"verl"`` for verl's dispatch by ``data_source``, or an ``http(s)://`` URL).

    ``failure_reward`` is the reward of a sample judger cannot score: ``"lowest"`` (the judger's
    lowest score for it) or a finite number (choose what a failure should teach the policy: above a
    wrong answer's score, it teaches the policy to make the judger fail). ``label_key`` is a column
    (``"answer"``) or a nested key (``"reward_model.ground_truth"``), or a list tried in order; the
    default reads ``reward_model["ground_truth"]``, then ``ground_truth``, then ``solution``.
    ``name`` names the reward in TRL's logs (``rewards/<name>/mean``) and prefixes judger's metrics;
    by default ``judger_<preset>`` (``judger_gsm8k``), numbered when a process makes several
    (``judger_gsm8k_2``), so two judger rewards in one ``reward_funcs`` never share a log series.
    """
    cls: Callable[..., JudgerReward] = AsyncJudgerReward if asynchronous else JudgerReward
    judger = resolve_judger(source)
    return cls(
        judger,
        failure_reward=failure_reward,
        label_key=label_key,
        name=name if name is not None else default_name(source, judger),
        log_metrics=log_metrics,
    )
