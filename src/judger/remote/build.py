"""Building Ray-backed judgers from a JudgerConfig with ``cpu_resources``."""

from __future__ import annotations

import math

from judger.core.judger import Judger
from judger.judgers.config import JudgerConfig, register_remote_builder
from judger.judgers.native import NativeJudger

READY_TIMEOUT_S = 120.0


@register_remote_builder
def build_remote(cfg: JudgerConfig) -> Judger:
    """A RemoteJudger (one worker) or a JudgerPool (several), registered with the resource manager.

    Starts a local Ray if none is running (or joins ``RAY_ADDRESS``), registers the CPUs (which
    fails fast with RuntimeError when the cluster cannot hold them), starts the actors and waits
    until each has built its judger. Any failure kills what was started and rolls back the
    registration.
    """
    from judger.remote.cluster import ensure_ray, kill_actor
    from judger.remote.pool import JudgerPool
    from judger.remote.remote_judger import RemoteJudger, wait_actors_ready
    from judger.remote.resources import CPUResourceManager

    resources = cfg.cpu_resources
    if resources is None:
        raise ValueError(f"JudgerConfig(judger_name={cfg.judger_name!r}) has no cpu_resources to go remote")
    ensure_ray()
    manager = CPUResourceManager.instance()
    name = manager.register(f"judger:{cfg.judger_name}", resources)
    replicas: list[RemoteJudger] = []
    try:
        local_cfg = cfg.model_copy(update={"cpu_resources": None})
        local = local_cfg.build_local()  # the driver's instance; also fails fast on a bad config
        actor_cfg = _actor_config(local_cfg, local, resources.num_cpus_per_worker)
        for i in range(resources.num_workers):
            replicas.append(
                RemoteJudger(
                    actor_cfg,
                    local=local,
                    num_cpus=resources.num_cpus_per_worker,
                    memory=resources.cpu_memory_per_worker,
                    replica_name=f"{cfg.judger_name}[{i}]",
                )
            )
        wait_actors_ready(replicas, READY_TIMEOUT_S)
    except BaseException:
        for replica in replicas:
            kill_actor(replica.actor, restart=False)
        manager.release(name)
        raise
    judger: RemoteJudger | JudgerPool = replicas[0] if len(replicas) == 1 else JudgerPool(replicas)
    judger.attach_registration(name, manager.release)
    return judger


def _actor_config(cfg: JudgerConfig, local: Judger, num_cpus: float) -> JudgerConfig:
    """The config each actor builds: a sync handler gets as many threads as the CPUs it reserved,
    a code judger as many sandboxes at once (:meth:`CodeJudgerConfig.fitted_to`).

    More threads than CPUs only make a CPU-bound handler's threads take turns at the GIL, and an
    actor call then ends with its threads' chunks finishing together, leaving the CPU idle until the
    next call arrives (measured: 1.63x vs 1.76x for a 2-worker pool on 2 cores). An explicit
    ``num_threads`` (e.g. for a handler that blocks on I/O) is kept.
    """

    fitted = getattr(cfg, "fitted_to", None)  # CodeJudgerConfig: sandboxes at once per actor
    if callable(fitted):
        return fitted(num_cpus)
    if not isinstance(local, NativeJudger) or cfg.num_threads is not None:
        return cfg
    if local.execution != "thread" or local.handler.kind != "sync":
        return cfg
    return cfg.model_copy(update={"num_threads": max(1, math.ceil(num_cpus))})
