"""A composition's ``merge_fn``, normalised when the judger is built, and :func:`weighted_sum`.

Users write ``merge_fn`` in one of two forms: per sample, ``merge_fn(state, {branch: output})``, or
the seed's list form, ``merge_fn(list[state], {branch: list[output]})``. :class:`Merge` takes either
and is called one way only -- lists of states and outputs in, one merged state (or the exception
that failed it) per state out -- so judging one sample and judging a batch merge the same way.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from judger.core.deadlines import judge_deadline
from judger.core.judger import JudgerOutput, maybe_await
from judger.core.outputs import check_output, finite_number
from judger.core.rollout import RolloutState
from judger.judgers.handlers import BATCH_ATTR

MergeFn = Callable[..., RolloutState | list[RolloutState] | Awaitable[RolloutState | list[RolloutState]]]
"""``merge_fn(state, {branch: output}) -> state``, or in the seed's list form
``merge_fn(list[state], {branch: list[output]}) -> list[state]``."""

_REWORDED = (KeyError, IndexError, TypeError, AttributeError)


def merge_takes_lists(merge_fn: Callable[..., Any]) -> bool:
    """Whether ``merge_fn`` speaks the seed's list form: marked with :func:`judger.batch_handler`,
    or its first parameter annotated with a list (``RolloutState | list[RolloutState]``)."""
    if getattr(merge_fn, BATCH_ATTR, False):
        return True
    try:
        params = list(inspect.signature(merge_fn).parameters.values())
    except (TypeError, ValueError):
        return False
    if not params or params[0].annotation is inspect.Parameter.empty:
        return False
    return "list" in str(params[0].annotation).lower()


Merged = tuple[RolloutState, dict[str, JudgerOutput]]
"""One state and its branches' rewards, ``{branch: output}``: what a merge takes per sample."""


class Merge:
    """``merge_fn`` of either form behind one call: ``await merge([(state, {branch: output}), ...])``
    gives each state's merged state, checked, or the exception that failed it, in order.

    The per-sample form is called once per state (each under the deadline, each failing alone); the
    list form once per set of selected branches (under one deadline; a failure fails every state of
    that call).
    """

    def __init__(self, merge_fn: MergeFn, *, lists: bool, judger_name: str, timeout: float) -> None:
        self.merge_fn = merge_fn
        self.lists = lists
        self.judger_name = judger_name
        self.timeout = timeout

    async def __call__(self, pending: list[Merged]) -> list[RolloutState | Exception]:
        if self.lists:
            return await self._by_branch_set(pending)
        out: list[RolloutState | Exception] = []
        for state, rewards in pending:
            try:
                out.append(await self._merge_one(state, rewards))
            except Exception as exc:
                out.append(exc)
        return out

    async def _by_branch_set(self, pending: list[Merged]) -> list[RolloutState | Exception]:
        groups: dict[tuple[str, ...], list[int]] = {}
        for i, (_, rewards) in enumerate(pending):
            groups.setdefault(tuple(rewards), []).append(i)
        out: list[RolloutState | Exception] = [*(state for state, _ in pending)]
        for names, members in groups.items():
            states = [pending[i][0] for i in members]
            judged = {name: [pending[i][1][name] for i in members] for name in names}
            try:
                merged: list[RolloutState | Exception] = list(await self._merge_lists(states, judged))
            except Exception as exc:
                merged = [exc] * len(members)
            for i, result in zip(members, merged):
                out[i] = result
        return out

    async def _merge_one(self, state: RolloutState, rewards: dict[str, JudgerOutput]) -> RolloutState:
        try:
            async with judge_deadline(self.judger_name, self.timeout, "merge_fn"):
                merged: Any = await maybe_await(self.merge_fn(state, rewards))
        except _REWORDED as exc:
            kind = next(k for k in _REWORDED if isinstance(exc, k))
            raise kind(
                f"merge_fn raised {type(exc).__name__}: {exc} on one RolloutState; if it expects the "
                "seed's list form merge_fn(list[RolloutState], {branch: list[output]}), pass "
                "merge_batch=True or annotate its first parameter as list[RolloutState]"
            ) from exc
        return self._check(merged)

    async def _merge_lists(
        self, states: list[RolloutState], judged: dict[str, list[JudgerOutput]]
    ) -> list[RolloutState]:
        async with judge_deadline(self.judger_name, self.timeout, "merge_fn"):
            merged: Any = await maybe_await(self.merge_fn(states, judged))
        if not isinstance(merged, list):
            raise TypeError(
                f"{self.judger_name!r}: list-form merge_fn returned {type(merged).__name__} for "
                f"{len(states)} states; it must return the list of states it was given"
            )
        if len(merged) != len(states):
            raise ValueError(
                f"{self.judger_name!r}: list-form merge_fn returned {len(merged)} states for {len(states)}"
            )
        return [self._check(m) for m in merged]

    def _check(self, merged: Any) -> RolloutState:
        if not isinstance(merged, RolloutState):
            raise TypeError(
                f"{self.judger_name!r}: merge_fn returned {type(merged).__name__}; it must return the "
                "RolloutState it was given, with reward set"
            )
        if merged.reward is not None:
            merged.reward = check_output(merged.reward, f"{self.judger_name}.merge_fn")
        return merged


def branch_weight(state: RolloutState, name: str) -> float:
    """:func:`weighted_sum`'s weight of branch ``name`` for ``state``: ``data_source[name]`` when
    data_source is a dict, else 1.0; a weight that is no finite number raises TypeError naming it."""
    weights = state.data_source if isinstance(state.data_source, dict) else {}
    weight = weights.get(name, 1.0)
    number = None if isinstance(weight, bool) else finite_number(weight)
    if number is None:
        raise TypeError(
            f"weighted_sum: weight of branch {name!r} in data_source must be a finite number, got {weight!r}"
        )
    return number


def weighted_sum(original: Any, judged: dict[str, Any]) -> Any:
    """Merge branch rewards as ``score = sum(weight[b] * score[b])``, weights from ``data_source``.

    ``data_source`` ``{"correctness": 0.9, "format": 0.1}`` gives those weights (a missing or
    non-dict data_source weighs every branch 1.0). Each branch's score is kept under its name.
    Takes one state and its outputs, or the seed's list form (lists of states and of outputs).
    """
    if isinstance(original, list):
        return [
            weighted_sum(state, {name: outputs[i] for name, outputs in judged.items()})
            for i, state in enumerate(original)
        ]
    reward: dict[str, Any] = {}
    total = 0.0
    for name, output in judged.items():
        if "score" not in output:
            raise KeyError(f"weighted_sum: branch {name!r} returned no 'score' (keys: {sorted(output)})")
        total += branch_weight(original, name) * float(output["score"])
        reward[name] = output["score"]
    original.reward = {"score": total, **reward}
    return original
