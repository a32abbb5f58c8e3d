"""ComposedJudger: route each rollout to branches by its ``data_source`` and merge their rewards."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from judger.core.deadlines import judge_deadline
from judger.core.errors import RoutingError
from judger.core.failure import JudgeFailure, mark_failed
from judger.core.judger import (
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_TIMEOUT,
    BaseJudger,
    BatchJudger,
    Judger,
    JudgerOutput,
    JudgerPayload,
    OnError,
    maybe_await,
)
from judger.core.outputs import check_output, finite_number
from judger.core.rollout import RolloutState, write_reward
from judger.judgers.handlers import BATCH_ATTR, import_object

MergeFn = Callable[..., RolloutState | list[RolloutState] | Awaitable[RolloutState | list[RolloutState]]]
"""``merge_fn(state, {branch: output}) -> state``, or in the seed's list form
``merge_fn(list[state], {branch: list[output]}) -> list[state]``."""

_BRANCHES = "branches"

# Multi-branch samples of the batch_judge in progress whose list-form merge waits for the batch's end.
_DEFERRED: contextvars.ContextVar[list[tuple[RolloutState, dict[str, JudgerOutput]]] | None] = (
    contextvars.ContextVar("judger_composed_deferred_merges", default=None)
)


# private: callers catch RoutingError, or the builtin type XTuner raises
class _RoutingValueError(RoutingError, ValueError):
    pass


class _RoutingKeyError(RoutingError, KeyError):
    pass


class _RoutingTypeError(RoutingError, TypeError):
    pass


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


def check_branches(branches: dict[Any, Any]) -> None:
    """The build-time checks on branches; raises ValueError / TypeError naming the bad branch."""
    if not branches:
        raise ValueError("ComposedJudger needs at least one branch: branches={'name': judger, ...}")
    for name, branch in branches.items():
        if not isinstance(name, str):
            raise TypeError(f"branch names must be str (they are matched against data_source); got {name!r}")
        if isinstance(branch, Judger):
            continue
        if isinstance(branch, BaseJudger):
            raise TypeError(
                "ComposedJudger branch must inherit Judger, not only BaseJudger. "
                f"branch={name!r}, type={type(branch).__name__}: it only subclasses BaseJudger; "
                "ComposedJudger composes Judger subclasses through preprocess -> judge_payload -> "
                "postprocess, so branches never write the same RolloutState concurrently. "
                "Subclass Judger instead."
            )
        raise TypeError(
            "ComposedJudger branch must be a Judger instance (or a judger config). "
            f"branch={name!r}, type={type(branch).__name__}"
        )


def all_judgers(judger: Any) -> Iterator[Any]:
    """``judger`` and every judger under it, compositions and leaves, at any depth (anything with a
    ``branches`` dict is a composition)."""
    stack = [judger]
    while stack:
        current = stack.pop()
        yield current
        branches = getattr(current, "branches", None)
        if isinstance(branches, dict):
            stack.extend(branches.values())


def leaf_judgers(judger: Any) -> Iterator[Any]:
    """The judgers that judge under ``judger``: itself, or the leaves of its branches at any depth."""
    return (j for j in all_judgers(judger) if not isinstance(getattr(j, "branches", None), dict))


class ComposedJudger(BatchJudger):
    """Several judgers behind one, chosen per rollout by ``RolloutState.data_source``.

    - ``data_source`` a str: that one branch judges; its reward is the reward.
    - ``data_source`` a dict: its keys select branches, which run concurrently; ``merge_fn(state,
      {branch: output})`` builds the reward (:func:`judger.weighted_sum` uses the dict's values as
      weights). ``merge_fn`` may be sync or async. ``batch_judge`` routes every sample by its own
      ``data_source`` (mixed batches work and each branch gets one batched call).
    - ``merge_batch`` (None: decided by :func:`merge_takes_lists`): the seed's list form, where
      ``merge_fn(list[state], {branch: list[output]})`` returns the list of states. ``batch_judge``
      then calls it once per set of selected branches, and ``judge`` with lists of one. Otherwise
      ``merge_fn`` is called once per sample, in ``batch_judge`` too.
    - None, an empty dict, an unknown branch, a non-str key, any other type, or several branches
      without a merge_fn is a configuration error: it raises (ValueError / KeyError / TypeError
      with XTuner's messages, as :class:`RoutingError`) whatever ``on_error`` says.

    A ComposedJudger can itself be a branch: it is selected by its own name, then runs those of its
    branches named in ``data_source``, or all of them when ``data_source`` names none.
    """

    merge_batch: bool = False  # subclasses that skip __init__ merge per sample

    def __init__(
        self,
        branches: dict[str, Judger],
        merge_fn: MergeFn | str | None = None,
        judger_name: str = "composed_judger",
        *,
        on_error: OnError = "fail",
        timeout: float = DEFAULT_TIMEOUT,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        merge_batch: bool | None = None,
    ) -> None:
        super().__init__(judger_name, on_error=on_error, timeout=timeout, max_concurrency=max_concurrency)
        check_branches(branches)
        self.branches: dict[str, Judger] = dict(branches)
        if isinstance(merge_fn, str):
            merge_fn = import_object(merge_fn)
        if merge_fn is not None and not callable(merge_fn):
            raise TypeError(f"merge_fn must be callable or an import string, got {type(merge_fn).__name__}")
        self.merge_fn = merge_fn
        if merge_batch is None:
            merge_batch = merge_fn is not None and merge_takes_lists(merge_fn)
        self.merge_batch = merge_batch

    # --- routing ---------------------------------------------------------------------------------

    def branch(self, name: str) -> Judger:
        """The judger of branch ``name`` (subclasses may build branches on first use)."""
        return self.branches[name]

    def route(self, data_source: Any) -> list[str]:
        """The branch names ``data_source`` selects, or a :class:`RoutingError` with XTuner's message."""
        known = sorted(self.branches)
        if data_source is None:
            raise _RoutingValueError(
                "ComposedJudger requires rollout_state.data_source to route judger branches. "
                f"judger={self.judger_name!r}, available={known}: set data_source to a branch name or "
                "a dict {branch: weight}"
            )
        if isinstance(data_source, str):
            if data_source not in self.branches:
                raise _RoutingKeyError(
                    f"Unknown judger branch from data_source: {data_source!r}, available={known} "
                    f"(judger {self.judger_name!r})"
                )
            return [data_source]
        if isinstance(data_source, dict):
            if not data_source:
                raise _RoutingValueError(
                    "ComposedJudger data_source dict must contain at least one judger branch. "
                    f"available={known}"
                )
            for key in data_source:
                if not isinstance(key, str):
                    raise _RoutingTypeError(
                        f"ComposedJudger data_source dict keys must be strings, got {key!r}; "
                        f"keys are branch names, available={known}"
                    )
                if key not in self.branches:
                    raise _RoutingKeyError(
                        f"Unknown judger branch from data_source: {key!r}, available={known} "
                        f"(judger {self.judger_name!r})"
                    )
            names = list(data_source)
            if len(names) > 1 and self.merge_fn is None:
                raise _RoutingValueError(
                    "ComposedJudger selected multiple branches but merge_fn is not provided. "
                    f"selected_keys={names!r} (judger {self.judger_name!r}); pass merge_fn "
                    "(e.g. judger.weighted_sum) to combine their rewards"
                )
            return names
        raise _RoutingTypeError(
            "ComposedJudger data_source must be a branch name string or a dict of branch names, "
            f"got {type(data_source).__name__}: {data_source!r}. available={known}"
        )

    def lowest_score_for(self, rollout_state: RolloutState) -> float | None:
        """The declared ``lowest_score``, else that of the one branch the sample routes to (its
        score is the sample's), or for :func:`weighted_sum` the weighted sum of the branches'; the
        floor of any other merge is not known."""
        return self._floor(rollout_state, self.route(rollout_state.data_source))

    def _floor(self, state: RolloutState, names: list[str]) -> float | None:
        if self.lowest_score is not None:
            return self.lowest_score
        floors = [self._branch_floor(state, name) for name in names]
        if len(names) == 1:
            return floors[0]
        if self.merge_fn is not weighted_sum or None in floors:
            return None
        total = 0.0
        for name, floor in zip(names, floors):
            try:
                weight = _branch_weight(state, name)
            except TypeError:  # the merge fails the sample: no floor to give
                return None
            if weight < 0:  # the lowest sum would need that branch's highest score
                return None
            total += weight * float(floor)  # type: ignore[arg-type]
        return total

    def _branch_floor(self, state: RolloutState, name: str) -> float | None:
        branch = self.branch(name)
        if isinstance(branch, ComposedJudger):  # a nested composition routes as a branch does
            return branch._floor(state, branch._route_nested(state.data_source))
        return branch.lowest_score_for(state)

    def capture(self, state: RolloutState, exc: BaseException) -> RolloutState:
        if isinstance(exc, RoutingError):
            raise exc  # a configuration error, not this sample's failure
        return super().capture(state, exc)

    def _route_nested(self, data_source: Any) -> list[str]:
        if isinstance(data_source, dict):
            mine = {k: v for k, v in data_source.items() if isinstance(k, str) and k in self.branches}
            if mine:
                return self.route(mine)
        elif isinstance(data_source, str) and data_source in self.branches:
            return [data_source]
        return self.route(dict.fromkeys(self.branches, 1.0))

    def _preprocess(self, state: RolloutState, names: list[str]) -> JudgerPayload:
        return {_BRANCHES: {name: _branch_preprocess(self.branch(name), state) for name in names}}

    def preprocess(self, rollout_state: RolloutState) -> JudgerPayload:
        return self._preprocess(rollout_state, self.route(rollout_state.data_source))

    # --- judging ---------------------------------------------------------------------------------

    async def run_payload(self, payload: JudgerPayload) -> JudgerOutput:
        # each branch keeps its own deadline; the composition adds none of its own
        routes: dict[str, JudgerPayload] = payload[_BRANCHES]
        outputs = await asyncio.gather(*(self.branch(n).run_payload(p) for n, p in routes.items()))
        return {_BRANCHES: dict(zip(routes, outputs))}

    async def _judge_batch(self, payloads: list[JudgerPayload]) -> list[Any]:
        """One batched call per branch over the samples routed to it; reassembled in input order."""
        per_branch: dict[str, tuple[list[int], list[JudgerPayload]]] = {}
        for i, payload in enumerate(payloads):
            for name, branch_payload in payload[_BRANCHES].items():
                owners, items = per_branch.setdefault(name, ([], []))
                owners.append(i)
                items.append(branch_payload)
        names = list(per_branch)
        branch_results = await asyncio.gather(*(self.branch(n).run_payloads(per_branch[n][1]) for n in names))
        assembled: list[dict[str, Any]] = [{} for _ in payloads]
        failures: dict[int, JudgeFailure] = {}
        for name, results in zip(names, branch_results):
            for i, result in zip(per_branch[name][0], results):
                if isinstance(result, JudgeFailure):
                    failures.setdefault(i, result)
                else:
                    assembled[i][name] = result
        return [failures.get(i) or {_BRANCHES: outs} for i, outs in enumerate(assembled)]

    async def _batch_judge_routed(self, rollout_states: list[RolloutState]) -> list[RolloutState]:
        """Samples routed to one plain branch go to it as one group: to its ``batch_judge`` whole
        when it has a batch path of its own (a preset's single pass over the states), else through
        :meth:`_judge_routed_group`; the rest (several branches, nested compositions) take the
        payload path. All write the same rewards: routing to one branch runs that branch's
        pre/postprocess."""
        if type(self).preprocess is not ComposedJudger.preprocess or (
            type(self).postprocess is not ComposedJudger.postprocess
        ):
            return await super().batch_judge(rollout_states)
        direct, rest = self._group_by_branch(rollout_states, plain=True)
        if rest and not all(self._has_own_batch_path(self.branch(name)) for name in direct):
            # each branch keeps one batched call: its samples all take the payload path with the rest
            direct, rest = self._group_by_branch(rollout_states, plain=False)
        if not direct:
            return await super().batch_judge(rollout_states)
        jobs: list[Awaitable[Any]] = [
            self._judge_routed_group(self.branch(name), group) for name, group in direct.items()
        ]
        if rest:
            jobs.append(super().batch_judge(rest))
        await asyncio.gather(*jobs)
        return rollout_states

    def _group_by_branch(
        self, rollout_states: list[RolloutState], *, plain: bool
    ) -> tuple[dict[str, list[RolloutState]], list[RolloutState]]:
        """The states routed to one branch that is not a composition (``plain=False``: only to one
        with a batch path of its own), by branch; and the others."""
        direct: dict[str, list[RolloutState]] = {}
        rest: list[RolloutState] = []
        # a batch holds a few data_source names: each is routed once (a string routes the same
        # every time; other values are routed per sample)
        routed: dict[str, str | None] = {}
        for state in rollout_states:
            source = state.data_source
            name = routed.get(source, "") if type(source) is str else ""
            if name == "":
                name = self._direct_branch(source, plain)
                if type(source) is str:
                    routed[source] = name
            if name is None:
                rest.append(state)
            else:
                direct.setdefault(name, []).append(state)
        return direct, rest

    def _direct_branch(self, data_source: Any, plain: bool) -> str | None:
        """The one branch ``data_source`` routes to if it can be judged as a group, or None (the
        payload path judges it, or reports why it cannot be routed)."""
        try:
            names = self.route(data_source)
        except RoutingError:
            raise  # the configuration's error, not a sample's: raised before any work starts
        except Exception:
            return None  # a subclass's per-sample refusal: the payload path reports it
        if len(names) != 1:
            return None
        branch = self.branch(names[0])
        if self._has_own_batch_path(branch) or (plain and not isinstance(branch, ComposedJudger)):
            return names[0]
        return None

    async def _judge_routed_group(self, branch: Judger, states: list[RolloutState]) -> None:
        """The payload path of states routed to ``branch`` alone, without the per-sample wrapping:
        the branch's preprocess, ``run_payloads`` and postprocess; failures captured as this
        judger captures them."""
        if self._has_own_batch_path(branch):
            await branch.batch_judge(states)
            return
        payloads: list[JudgerPayload] = []
        owners: list[RolloutState] = []
        for state in states:
            try:
                payloads.append(branch.preprocess(state))
                owners.append(state)
            except Exception as exc:
                self.capture(state, exc)
        results = await branch.run_payloads(payloads)
        plain = branch._writes_plainly()
        for state, result in zip(owners, results):
            if isinstance(result, JudgeFailure):
                if self.on_error == "raise":
                    raise result.to_exception()
                mark_failed(state, result)
            elif plain:
                write_reward(state, result)
            else:
                await self._branch_postprocess(branch, state, result)

    async def _branch_postprocess(self, branch: Judger, state: RolloutState, output: JudgerOutput) -> None:
        try:
            await maybe_await(branch.postprocess(state, output))
        except Exception as exc:
            self.capture(state, exc)

    def _has_own_batch_path(self, branch: Judger) -> bool:
        return (
            not isinstance(branch, ComposedJudger)
            and type(branch).batch_judge is not Judger.batch_judge
            and branch.on_error == self.on_error
        )

    async def postprocess(self, rollout_state: RolloutState, output: JudgerOutput) -> RolloutState:
        outputs: dict[str, JudgerOutput] = output[_BRANCHES]
        if len(outputs) == 1:
            ((name, out),) = outputs.items()
            return await maybe_await(self.branch(name).postprocess(rollout_state, out))
        if self.merge_fn is None:
            raise _RoutingValueError(
                "ComposedJudger selected multiple branches but merge_fn is not provided. "
                f"selected_keys={list(outputs)!r} (judger {self.judger_name!r})"
            )
        rewards = {
            name: await _branch_reward(self.branch(name), rollout_state, out) for name, out in outputs.items()
        }
        if self.merge_batch:
            deferred = _DEFERRED.get()
            if deferred is not None:  # batch_judge merges the whole batch at its end
                deferred.append((rollout_state, rewards))
                return rollout_state
            (one,) = await self._merge_lists([rollout_state], {n: [r] for n, r in rewards.items()})
            return one
        try:
            async with judge_deadline(self.judger_name, self.timeout, "merge_fn"):
                merged: Any = await maybe_await(self.merge_fn(rollout_state, rewards))
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            kind = next(k for k in (KeyError, IndexError, TypeError, AttributeError) if isinstance(exc, k))
            raise kind(
                f"merge_fn raised {type(exc).__name__}: {exc} on one RolloutState; if it expects the "
                "seed's list form merge_fn(list[RolloutState], {branch: list[output]}), pass "
                "merge_batch=True or annotate its first parameter as list[RolloutState]"
            ) from exc
        return self._check_merged(merged)

    def _check_merged(self, merged: Any) -> RolloutState:
        if not isinstance(merged, RolloutState):
            raise TypeError(
                f"{self.judger_name!r}: merge_fn returned {type(merged).__name__}; it must return the "
                "RolloutState it was given, with reward set"
            )
        if merged.reward is not None:
            merged.reward = check_output(merged.reward, f"{self.judger_name}.merge_fn")
        return merged

    async def _merge_lists(
        self, states: list[RolloutState], judged: dict[str, list[JudgerOutput]]
    ) -> list[RolloutState]:
        """One call of a list-form merge_fn, its result checked: a list of as many states."""
        assert self.merge_fn is not None
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
        return [self._check_merged(m) for m in merged]

    async def batch_judge(self, rollout_states: list[RolloutState]) -> list[RolloutState]:
        if not self.merge_batch:
            return await self._batch_judge_routed(rollout_states)
        # single-branch samples never reach merge_fn, so the branches' own batch paths still serve
        deferred: list[tuple[RolloutState, dict[str, JudgerOutput]]] = []
        token = _DEFERRED.set(deferred)
        try:
            await self._batch_judge_routed(rollout_states)
        finally:
            _DEFERRED.reset(token)
        # the seed's list form: one merge_fn call per set of selected branches
        groups: dict[tuple[str, ...], list[tuple[RolloutState, dict[str, JudgerOutput]]]] = {}
        for state, rewards in deferred:
            groups.setdefault(tuple(rewards), []).append((state, rewards))
        for names, members in groups.items():
            states = [state for state, _ in members]
            judged = {name: [rewards[name] for _, rewards in members] for name in names}
            try:
                merged = await self._merge_lists(states, judged)
            except Exception as exc:
                for state in states:
                    self.capture(state, exc)
                continue
            for state, result in zip(states, merged):
                if result is not state:  # merge_fn built new states: carry their results over
                    state.reward, state.status = result.reward, result.status
                    state.error_msg = result.error_msg
        return rollout_states

    async def aclose(self) -> None:
        await asyncio.gather(*(b.aclose() for b in self.branches.values()))


def _branch_preprocess(branch: Judger, state: RolloutState) -> JudgerPayload:
    if isinstance(branch, ComposedJudger):
        return branch._preprocess(state, branch._route_nested(state.data_source))
    return branch.preprocess(state)


async def _branch_reward(branch: Judger, state: RolloutState, output: JudgerOutput) -> JudgerOutput:
    """What merge_fn sees of a branch: its output, or for a nested composition its merged reward."""
    if not isinstance(branch, ComposedJudger):
        return output
    scratch = state.model_copy(update={"reward": None})  # shallow: big fields are shared, not copied
    token = _DEFERRED.set(None)  # a nested composition merges now, never into its parent's batch
    try:
        return (await branch.postprocess(scratch, output)).reward or {}
    finally:
        _DEFERRED.reset(token)


def _branch_weight(state: RolloutState, name: str) -> float:
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
        total += _branch_weight(original, name) * float(output["score"])
        reward[name] = output["score"]
    original.reward = {"score": total, **reward}
    return original
