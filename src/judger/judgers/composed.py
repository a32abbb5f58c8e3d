"""ComposedJudger: route each rollout to branches by its ``data_source`` and merge their rewards."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from judger.core.deadlines import judge_deadline
from judger.core.failure import JudgeFailure
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
from judger.core.outputs import check_output
from judger.core.rollout import RolloutState
from judger.judgers.handlers import import_object

MergeFn = Callable[[RolloutState, dict[str, JudgerOutput]], RolloutState | Awaitable[RolloutState]]

_BRANCHES = "branches"


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
                f"branch {name!r} ({type(branch).__name__}) only subclasses BaseJudger; ComposedJudger "
                "composes Judger subclasses through preprocess -> judge_payload -> postprocess, so "
                "branches never write the same RolloutState concurrently. Subclass Judger instead."
            )
        raise TypeError(f"branch {name!r} must be a Judger (or a judger config), got {type(branch).__name__}")


class ComposedJudger(BatchJudger):
    """Several judgers behind one, chosen per rollout by ``RolloutState.data_source``.

    - ``data_source`` a str: that one branch judges; its reward is the reward.
    - ``data_source`` a dict: its keys select branches, which run concurrently; ``merge_fn(state,
      {branch: output})`` builds the reward (:func:`judger.weighted_sum` uses the dict's values as
      weights). ``merge_fn`` may be sync or async and is called once per sample, also in
      ``batch_judge``, which routes every sample by its own ``data_source`` (mixed batches work and
      each branch gets one batched call).
    - None, an empty dict, an unknown branch, a non-str key or any other type is an error for that
      sample (ValueError / KeyError / TypeError as in XTuner), reported per ``on_error``.

    A ComposedJudger can itself be a branch: it is selected by its own name, then runs those of its
    branches named in ``data_source``, or all of them when ``data_source`` names none.
    """

    def __init__(
        self,
        branches: dict[str, Judger],
        merge_fn: MergeFn | str | None = None,
        judger_name: str = "composed_judger",
        *,
        on_error: OnError = "fail",
        timeout: float = DEFAULT_TIMEOUT,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    ) -> None:
        super().__init__(judger_name, on_error=on_error, timeout=timeout, max_concurrency=max_concurrency)
        check_branches(branches)
        self.branches: dict[str, Judger] = dict(branches)
        if isinstance(merge_fn, str):
            merge_fn = import_object(merge_fn)
        if merge_fn is not None and not callable(merge_fn):
            raise TypeError(f"merge_fn must be callable or an import string, got {type(merge_fn).__name__}")
        self.merge_fn = merge_fn

    # --- routing ---------------------------------------------------------------------------------

    def branch(self, name: str) -> Judger:
        """The judger of branch ``name`` (subclasses may build branches on first use)."""
        return self.branches[name]

    def route(self, data_source: Any) -> list[str]:
        """The branch names ``data_source`` selects, or the XTuner-compatible error."""
        known = list(self.branches)
        if data_source is None:
            raise ValueError(
                f"RolloutState.data_source is None; {self.judger_name!r} routes by data_source: set it to "
                f"a branch name (one of {known}) or a dict {{branch: weight}}"
            )
        if isinstance(data_source, str):
            if data_source not in self.branches:
                raise KeyError(
                    f"data_source {data_source!r} is not a branch of {self.judger_name!r}; known: {known}"
                )
            return [data_source]
        if isinstance(data_source, dict):
            if not data_source:
                raise ValueError(f"data_source is an empty dict; name at least one branch of {known}")
            for key in data_source:
                if not isinstance(key, str):
                    raise TypeError(f"data_source keys must be branch names (str), got {key!r}")
                if key not in self.branches:
                    raise KeyError(
                        f"data_source key {key!r} is not a branch of {self.judger_name!r}; known: {known}"
                    )
            names = list(data_source)
            if len(names) > 1 and self.merge_fn is None:
                raise ValueError(
                    f"data_source selects {len(names)} branches {names} of {self.judger_name!r} but no "
                    "merge_fn was given; pass merge_fn (e.g. judger.weighted_sum) to combine their rewards"
                )
            return names
        raise TypeError(
            f"data_source must be a str or a dict of branch names, got {type(data_source).__name__}"
        )

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

    async def batch_judge(self, rollout_states: list[RolloutState]) -> list[RolloutState]:
        """Samples routed to one branch that has a batch path of its own (a preset's single pass
        over the states) go to that branch's ``batch_judge`` whole; the rest take the payload path.
        Both write the same rewards: routing to one branch runs that branch's pre/postprocess."""
        if type(self).preprocess is not ComposedJudger.preprocess or (
            type(self).postprocess is not ComposedJudger.postprocess
        ):
            return await super().batch_judge(rollout_states)
        direct: dict[str, list[RolloutState]] = {}
        rest: list[RolloutState] = []
        for state in rollout_states:
            try:
                names = self.route(state.data_source)
            except Exception:
                rest.append(state)  # the payload path routes it again and reports the error
                continue
            if len(names) == 1 and self._has_own_batch_path(self.branch(names[0])):
                direct.setdefault(names[0], []).append(state)
            else:
                rest.append(state)
        if not direct:
            return await super().batch_judge(rollout_states)
        jobs = [self.branch(name).batch_judge(group) for name, group in direct.items()]
        if rest:
            jobs.append(super().batch_judge(rest))
        await asyncio.gather(*jobs)
        return rollout_states

    def _has_own_batch_path(self, branch: Judger) -> bool:
        return (
            not isinstance(branch, ComposedJudger)
            and type(branch).batch_judge is not Judger.batch_judge
            and branch.on_error == self.on_error
        )

    async def postprocess(self, rollout_state: RolloutState, output: JudgerOutput) -> RolloutState:  # type: ignore[override]
        outputs: dict[str, JudgerOutput] = output[_BRANCHES]
        if len(outputs) == 1:
            ((name, out),) = outputs.items()
            return await maybe_await(self.branch(name).postprocess(rollout_state, out))
        if self.merge_fn is None:
            raise ValueError(f"{self.judger_name!r}: several branches ran but there is no merge_fn")
        rewards = {
            name: await _branch_reward(self.branch(name), rollout_state, out) for name, out in outputs.items()
        }
        async with judge_deadline(self.judger_name, self.timeout, "merge_fn"):
            merged = await maybe_await(self.merge_fn(rollout_state, rewards))
        if not isinstance(merged, RolloutState):
            raise TypeError(
                f"{self.judger_name!r}: merge_fn returned {type(merged).__name__}; it must return the "
                "RolloutState it was given, with reward set"
            )
        if merged.reward is not None:
            merged.reward = check_output(merged.reward, f"{self.judger_name}.merge_fn")
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


def weighted_sum(original: RolloutState, judged: dict[str, JudgerOutput]) -> RolloutState:
    """Merge branch rewards as ``score = sum(weight[b] * score[b])``, weights from ``data_source``.

    ``data_source`` ``{"correctness": 0.9, "format": 0.1}`` gives those weights (a missing or
    non-dict data_source weighs every branch 1.0). Each branch's score is kept under its name.
    """
    weights = original.data_source if isinstance(original.data_source, dict) else {}
    reward: dict[str, Any] = {}
    total = 0.0
    for name, output in judged.items():
        if "score" not in output:
            raise KeyError(f"weighted_sum: branch {name!r} returned no 'score' (keys: {sorted(output)})")
        weight = weights.get(name, 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)):
            raise TypeError(
                f"weighted_sum: weight of branch {name!r} in data_source must be a number, got {weight!r}"
            )
        total += float(weight) * float(output["score"])
        reward[name] = output["score"]
    original.reward = {"score": total, **reward}
    return original
