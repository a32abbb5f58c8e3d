"""The judger ``judger score`` builds from its arguments, and how it judges a batch of states.

Shared by the one-process run (:mod:`judger.cli.score`), its shard processes
(:mod:`judger.cli.shards`), Ray actors (:mod:`judger.cli.ray_score`), ``judger eval`` and
``judger view``: each builds the judger and judges states exactly so.
"""

from __future__ import annotations

import argparse
from functools import partial
from typing import Any

from judger.cli.pools import size_process_pool
from judger.core.errors import NoResponseError
from judger.core.failure import JudgeFailure, mark_failed
from judger.core.judger import BaseJudger, gather_bounded
from judger.judgers.config import ComposedJudgerConfig, JudgerConfig, build_judger
from judger.presets.loading import ConfigError, load_preset, load_target

# --- building the judger --------------------------------------------------------------------------


def default_config(compat: str | None = None) -> Any:
    """verl's dispatch by data_source (``judger.compat.verl.default_judger_config``)."""
    from judger.compat.verl import default_judger_config

    if compat not in (None, "verl"):
        raise ValueError(f"--compat must be 'verl' or absent, got {compat!r}")
    return default_judger_config(compat="verl" if compat else None)


def with_workers(cfg: Any, workers: int) -> Any:
    """A copy of ``cfg`` with ``max_concurrency=workers`` on it and on every branch config."""

    if isinstance(cfg, ComposedJudgerConfig):
        branches = {name: with_workers(b, workers) for name, b in cfg.branches.items()}
        return cfg.model_copy(update={"branches": branches, "max_concurrency": workers})
    if isinstance(cfg, JudgerConfig):
        return cfg.model_copy(update={"max_concurrency": workers})
    return cfg


def load_config(args: argparse.Namespace) -> Any:
    """The config the arguments name (-c, --preset or verl's routing), ``--workers`` applied."""
    if args.config:
        cfg = load_target(args.config)
    elif args.preset:
        cfg = load_preset(args.preset)
    else:
        cfg = default_config(args.compat)
    return with_workers(cfg, args.workers) if args.workers else cfg


def build(args: argparse.Namespace) -> Any:

    cfg = load_config(args)
    if args.workers:
        size_process_pool(args.workers)
    if isinstance(cfg, BaseJudger):
        return cfg
    try:
        return build_judger(cfg)
    except Exception as exc:
        raise ConfigError(f"cannot build the judger: {type(exc).__name__}: {exc}") from exc


# --- scoring --------------------------------------------------------------------------------------


def fail_unanswered(judger: Any, states: list[Any]) -> list[Any]:
    """Mark the states whose response is null FAILED with the presets' :class:`NoResponseError`,
    whatever the judger (a judger of one's own may not check); the others, to judge."""
    answered = [s for s in states if s.response is not None]
    if len(answered) < len(states):
        name = getattr(judger, "judger_name", type(judger).__name__)
        failure = JudgeFailure.from_exception(NoResponseError(), name)
        for state in states:
            if state.response is None:
                mark_failed(state, failure)
    return answered


async def score_states(judger: Any, states: list[Any], batch_size: int, progress: Any = None) -> None:
    """``judger.batch_judge`` over ``states`` in batches (two in flight), advancing ``progress``.

    A state with a null response is not judged: it is FAILED with a reason.
    """

    unanswered = len(states)
    states = fail_unanswered(judger, states)
    unanswered -= len(states)
    if progress is not None and unanswered:
        progress(unanswered)
    batches = [states[i : i + batch_size] for i in range(0, len(states), batch_size)]

    async def one(batch: list[Any]) -> None:
        await judger.batch_judge(batch)
        if progress is not None:
            progress(len(batch))

    # two batches in flight: the next one starts while the slowest samples of the last finish
    await gather_bounded([partial(one, b) for b in batches], 2)
