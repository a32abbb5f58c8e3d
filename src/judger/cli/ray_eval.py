"""`judger eval --ray`: the generated samples judged by a JudgerPool spread over a Ray cluster.

Generation stays where it is (the servers are the cluster's GPUs, reached over HTTP); judging,
which on one machine runs on its cores, goes to one actor per free CPU of the cluster (at most
``--workers``), spread over the nodes: the command's judger config gets ``cpu_resources`` and is
built as any Ray-backed judger (:mod:`judger.remote.build`), so each group's samples are judged on
the least-loaded actors, preprocess and postprocess stay here, and an actor lost with its node has
its payloads judged again on another. Outputs are the ones the same judger gives in one process.
"""

from __future__ import annotations

import argparse
from typing import Any

from judger.cli import ray_score
from judger.cli.judging import load_config
from judger.judgers.config import CPUResourcesConfig, JudgerConfig, build_judger
from judger.presets.loading import ConfigError

ACTOR_MEMORY = 512 << 20
"""Bytes of Ray memory each judging actor reserves (a MATH judger with its worker: under 400 MB)."""


def refusal(cfg: Any) -> str | None:
    """Why ``cfg`` cannot be judged on a pool of actors, if it cannot."""
    refused = ray_score.refusal(cfg)
    if refused is not None:
        return refused
    if not isinstance(cfg, JudgerConfig):
        return (
            "--ray judges on a pool of actors built from one JudgerConfig; a ComposedJudgerConfig's "
            "branches can each have their own cpu_resources instead (then drop --ray)"
        )
    return None


def build(args: argparse.Namespace) -> Any:
    """The judger of ``judger eval --ray``: a JudgerPool over the cluster at ``args.ray``. Raises
    ConfigError (said by the command) when the config cannot go there or the cluster cannot take it."""
    cfg = load_config(args)
    refused = refusal(cfg)
    if refused is not None:
        raise ConfigError(refused)
    try:
        ray_score.connect(args.ray)
        ray_score.ship_by_value(args.config)
        workers = ray_score.actor_count(args.workers)
        resources = CPUResourcesConfig(
            num_workers=workers, num_cpus_per_worker=1, cpu_memory_per_worker=ACTOR_MEMORY
        )
        return build_judger(ray_score.fitted(cfg, 1).model_copy(update={"cpu_resources": resources}))
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"cannot judge on Ray: {type(exc).__name__}: {exc}") from exc
