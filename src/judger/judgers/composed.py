"""ComposedJudger: route each rollout to branches by its ``data_source`` and merge their rewards."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

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
    batch_plan,
    judge_payloads,
    maybe_await,
)
from judger.core.rollout import RolloutState
from judger.judgers.handlers import import_object
from judger.judgers.merge import Merge, Merged, MergeFn, branch_weight, merge_takes_lists, weighted_sum

__all__ = ["ComposedJudger", "MergeFn", "RoutingError", "merge_takes_lists", "weighted_sum"]

_BRANCHES = "branches"


# private: callers catch RoutingError, or the builtin type XTuner raises
class _RoutingValueError(RoutingError, ValueError):
    pass


class _RoutingKeyError(RoutingError, KeyError):
    pass


class _RoutingTypeError(RoutingError, TypeError):
    pass


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
    judges_states = True  # route -> group -> judge -> merge, in :meth:`judge_states`
    _merge: Merge | None = None

    @property
    def merge_fn(self) -> MergeFn | None:
        """The user's ``merge_fn``, as given; :attr:`_merge` is the one form it is called in."""
        return self._merge.merge_fn if self._merge is not None else None

    @merge_fn.setter
    def merge_fn(self, merge_fn: MergeFn | None) -> None:
        self._merge = (
            None
            if merge_fn is None
            else Merge(merge_fn, lists=self.merge_batch, judger_name=self.judger_name, timeout=self.timeout)
        )

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
        if merge_batch is None:
            merge_batch = merge_fn is not None and merge_takes_lists(merge_fn)
        self.merge_batch = merge_batch
        self.merge_fn = merge_fn  # after merge_batch: normalised by its form

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
                weight = branch_weight(state, name)
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

    async def judge_states(self, rollout_states: list[RolloutState]) -> None:
        """Route -> group -> judge -> merge. Samples routed to one plain branch are judged as that
        branch's group (its own batch pass where it has one); the rest -- several branches, nested
        compositions -- take the payload path, one batched call per branch, and are merged at the
        end (the list form of ``merge_fn`` once per set of selected branches). Routing a sample to
        one branch writes what that branch alone writes: its pre/postprocess run."""
        direct, rest = self._group_by_branch(rollout_states, plain=True)
        if rest and not all(batch_plan(self.branch(name)).own_pass for name in direct):
            # each branch keeps one batched call: its samples all take the payload path with the rest
            direct, rest = self._group_by_branch(rollout_states, plain=False)
        jobs = [self._judge_group(self.branch(name), group) for name, group in direct.items()]
        if rest:
            jobs.append(self._judge_and_merge(rest))
        await asyncio.gather(*jobs)

    def _group_by_branch(
        self, rollout_states: list[RolloutState], *, plain: bool
    ) -> tuple[dict[str, list[RolloutState]], list[RolloutState]]:
        """The states routed to one branch that is not a composition (``plain=False``: only to one
        with a batch pass of its own), by branch; and the others."""
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
        if isinstance(branch, ComposedJudger):
            return None
        return names[0] if plain or self._hands_states(branch) else None

    def _hands_states(self, branch: Judger) -> bool:
        """Whether the states routed to ``branch`` alone go to its ``batch_judge`` whole."""
        return batch_plan(branch).own_pass and branch.on_error == self.on_error

    async def _judge_group(self, branch: Judger, states: list[RolloutState]) -> None:
        """States routed to ``branch`` alone: its ``batch_judge`` where it has a pass of its own,
        else its payload path, without the per-sample wrapping, failures captured as this judger
        captures them."""
        if self._hands_states(branch):
            await branch.batch_judge(states)
        else:
            await judge_payloads(branch, states, policy=self)

    async def _judge_and_merge(self, rollout_states: list[RolloutState]) -> None:
        """The payload path of the samples no single branch judges alone: one batched call per
        branch (:meth:`_judge_batch`), each single-branch result written by its branch, the others
        merged (by a list-form ``merge_fn`` together, at the end)."""
        payloads: list[JudgerPayload] = []
        owners: list[RolloutState] = []
        for state in rollout_states:
            try:
                payloads.append(self.preprocess(state))
                owners.append(state)
            except Exception as exc:
                self.capture(state, exc)
        pending: list[Merged] = []
        for state, result in zip(owners, await self.run_payloads(payloads)):
            if isinstance(result, JudgeFailure):
                if self.on_error == "raise":
                    raise result.to_exception()
                mark_failed(state, result)
                continue
            try:
                rewards = await self._branch_rewards(state, result[_BRANCHES])
            except Exception as exc:
                self.capture(state, exc)
                continue
            if rewards is None:
                continue
            pending.append((state, rewards))
            if self._merge is not None and not self._merge.lists:
                # a per-sample merge_fn merges each sample at once: a batch's rewards are not all
                # kept alive until its end (the collector would walk them, again and again)
                await self._merge_all(pending)
                pending.clear()
        await self._merge_all(pending)

    async def _branch_rewards(
        self, state: RolloutState, outputs: dict[str, JudgerOutput]
    ) -> dict[str, JudgerOutput] | None:
        """What ``merge_fn`` gets of ``state``'s branches; None when one branch judged it and its
        postprocess has written the reward already (nothing to merge)."""
        if len(outputs) == 1:
            await self._write_single(state, outputs)
            return None
        if self._merge is None:
            raise _RoutingValueError(
                "ComposedJudger selected multiple branches but merge_fn is not provided. "
                f"selected_keys={list(outputs)!r} (judger {self.judger_name!r})"
            )
        return {name: await _branch_reward(self.branch(name), state, out) for name, out in outputs.items()}

    async def _merge_all(self, pending: list[Merged]) -> None:
        """Merge each state's branch rewards into its reward; a state the merge fails is captured
        alone (the list form of ``merge_fn`` runs once per set of selected branches)."""
        if not pending:
            return
        assert self._merge is not None  # pending is empty without a merge_fn
        for (state, _), merged in zip(pending, await self._merge(pending)):
            if isinstance(merged, Exception):
                self.capture(state, merged)
            elif merged is not state:  # merge_fn built new states: carry their results over
                state.reward, state.status = merged.reward, merged.status
                state.error_msg = merged.error_msg

    async def _write_single(self, state: RolloutState, outputs: dict[str, JudgerOutput]) -> RolloutState:
        ((name, out),) = outputs.items()
        return await maybe_await(self.branch(name).postprocess(state, out))

    async def postprocess(self, rollout_state: RolloutState, output: JudgerOutput) -> RolloutState:
        outputs: dict[str, JudgerOutput] = output[_BRANCHES]
        if len(outputs) == 1:  # the branch's reward is the reward, as its postprocess writes it
            return await self._write_single(rollout_state, outputs)
        rewards = await self._branch_rewards(rollout_state, outputs)
        assert rewards is not None and self._merge is not None
        (merged,) = await self._merge([(rollout_state, rewards)])
        if isinstance(merged, Exception):
            raise merged
        return merged

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
    return (await branch.postprocess(scratch, output)).reward or {}
