"""RemoteJudger: a judger whose ``judge_payload`` runs in one Ray actor."""

from __future__ import annotations

import asyncio
from typing import Any

from judger.core.judger import Judger
from judger.judgers.config import JudgerConfig
from judger.remote.cluster import DEFAULT_MAX_RESTARTS, ensure_ray, kill_actor, spawn_actor
from judger.remote.dispatch import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_MAX_RETRIES,
    Dispatcher,
    Replica,
)
from judger.remote.foreign_actor import ForeignActor, speaks_judger_protocol
from judger.remote.ray_judger import RayJudger, default_call_timeout

# Calls an actor accepts at once beyond the payload bound: status and readiness probes.
_SPARE_ACTOR_CALLS = 8


class RemoteJudger(RayJudger):
    """The driver-side proxy of one :class:`~judger.JudgerActor`.

    ``preprocess`` / ``postprocess`` run here with a local instance (``judger_config.build_local()``);
    only payloads go to the actor, which runs the same judger's ``run_payloads`` (per-sample
    deadlines, validation, failure capture) and sends back outputs or ``JudgeFailure`` values.

    Every call has an outer deadline (``call_timeout`` seconds, by default derived from the judger's
    ``timeout``). A dead actor is restarted by Ray (``max_restarts``, unlimited by default); a hung
    one (its event loop does not answer once the deadline has passed) is killed so Ray restarts
    it, while a slow one whose loop answers is waited on for a few deadlines more. Payloads of a
    lost call are retried one by one up to ``max_retries`` times, the last time alone on an idle
    actor, so a payload that crashes or blocks the actor fails by itself; then they fail as
    samples (``on_error`` applies). At most ``max_in_flight`` payloads are outstanding; further
    callers wait (backpressure).

    Built by ``JudgerConfig(cpu_resources=CPUResourcesConfig(num_workers=1)).build()``, which also
    registers the CPUs with :class:`~judger.CPUResourceManager`; constructing one directly does not.
    Close it (``await aclose()``, ``close()`` or a ``with`` block) to kill the actor.

    XTuner's form ``RemoteJudger(actor, judger_name=..., preprocess_judger=...)`` wraps an actor
    that exists already: a JudgerActor handle, or any actor with XTuner's ``judge_payload.remote``
    (see :mod:`judger.remote.foreign_actor`). ``preprocess_judger`` (default: a plain
    :class:`~judger.Judger`) runs preprocess / postprocess on the driver, as in XTuner.
    """

    def __init__(
        self,
        judger_config: JudgerConfig | Any = None,
        judger_name: str | None = None,
        preprocess_judger: Judger | None = None,
        *,
        actor: Any = None,
        local: Judger | None = None,
        num_cpus: float | None = None,
        memory: int | None = None,
        max_restarts: int = DEFAULT_MAX_RESTARTS,
        chunk_size: int | None = DEFAULT_CHUNK_SIZE,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        call_timeout: float | None = None,
        replica_name: str | None = None,
    ) -> None:

        if judger_config is not None and not isinstance(judger_config, JudgerConfig):
            if actor is not None:
                raise TypeError(
                    f"RemoteJudger got an actor twice (positionally, a {type(judger_config).__name__}, "
                    "and as actor=); pass a JudgerConfig first, or only the actor"
                )
            actor, judger_config = judger_config, None  # XTuner's RemoteJudger(actor, judger_name, ...)
        if judger_config is None:
            self._init_from_actor(
                actor,
                judger_name,
                local if local is not None else preprocess_judger,
                chunk_size=chunk_size,
                max_in_flight=max_in_flight,
                max_retries=max_retries,
                call_timeout=call_timeout,
                replica_name=replica_name,
            )
            return
        if preprocess_judger is not None:
            local = local if local is not None else preprocess_judger
        resources = judger_config.cpu_resources
        # the actor builds the judger locally; it must not try to go remote again
        actor_config = judger_config.model_copy(update={"cpu_resources": None})
        self.judger_config: JudgerConfig | None = actor_config
        local = local if local is not None else actor_config.build_local()
        if num_cpus is None:
            num_cpus = resources.num_cpus_per_worker if resources else 1.0
        if memory is None and resources is not None:
            memory = resources.cpu_memory_per_worker
        if actor is None:
            ensure_ray()
            actor = spawn_actor(
                actor_config,
                num_cpus=num_cpus,
                memory=memory,
                max_concurrency=max_in_flight + _SPARE_ACTOR_CALLS,
                max_restarts=max_restarts,
            )
        self.endpoint = Replica(actor, replica_name or f"{local.judger_name}[0]")
        actor_threads = getattr(self.judger_config, "num_threads", None)
        timeout_of = (
            default_call_timeout(local, actor_threads) if call_timeout is None else (lambda n: call_timeout)
        )
        self.call_timeout_of = timeout_of
        dispatcher = Dispatcher(
            local.judger_name,
            [self.endpoint],
            call_timeout=timeout_of,
            chunk_size=chunk_size,
            max_in_flight=max_in_flight,
            max_retries=max_retries,
        )
        super().__init__(local, dispatcher, judger_name)
        self._actor = actor

    def _init_from_actor(
        self,
        actor: Any,
        judger_name: str | None,
        local: Judger | None,
        *,
        chunk_size: int | None,
        max_in_flight: int,
        max_retries: int,
        call_timeout: float | None,
        replica_name: str | None,
    ) -> None:

        if actor is None:
            raise TypeError(
                "RemoteJudger needs a JudgerConfig (judger's form: RemoteJudger(judger_config)) or an "
                "existing actor (XTuner's form: RemoteJudger(actor, judger_name=..., preprocess_judger=...))"
            )
        name = judger_name or (local.judger_name if local is not None else "remote_judger")
        if local is None:
            local = Judger(name)  # XTuner's default: Judger's own preprocess / postprocess
        self.judger_config = None
        foreign = not speaks_judger_protocol(actor)
        handle = ForeignActor(actor, name) if foreign else actor
        self.endpoint = Replica(handle, replica_name or f"{name}[0]", probes_loop=not foreign)
        timeout_of = default_call_timeout(local) if call_timeout is None else (lambda n: call_timeout)
        self.call_timeout_of = timeout_of
        dispatcher = Dispatcher(
            name,
            [self.endpoint],
            call_timeout=timeout_of,
            # XTuner's protocol takes one payload per call, each under its own deadline: a chunk
            # would share one deadline, and a hung payload would fail its neighbours
            chunk_size=1 if foreign else chunk_size,
            max_in_flight=max_in_flight,
            max_retries=max_retries,
        )
        super().__init__(local, dispatcher, name)
        self._actor = actor

    @property
    def actor(self) -> Any:
        """The actor handle (as given, in XTuner's form)."""
        return self._actor

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Block until the actor has started (its judger built); raise RuntimeError if it cannot."""
        wait_actors_ready([self], timeout)

    async def actor_stats(self) -> dict[str, Any]:
        """The actor's own counters: pid, calls, payloads, payload keys received."""
        return await asyncio.wrap_future(self.endpoint.handle.stats.remote().future())

    def _kill_actors(self) -> None:
        self.endpoint.closed = True
        kill_actor(self._actor, restart=False)


def wait_actors_ready(judgers: list[RemoteJudger], timeout: float) -> None:
    """Block until every judger's actor answers; RuntimeError naming the first that cannot start."""
    import ray
    from ray.exceptions import GetTimeoutError

    refs = [j.endpoint.handle.stats.remote() for j in judgers]
    try:
        ray.get(refs, timeout=timeout)
    except GetTimeoutError as exc:
        raise RuntimeError(
            f"JudgerActor(s) of {judgers[0].judger_name!r} did not start within {timeout:g} s; the cluster "
            "may lack the CPUs or memory asked for (ray status shows what is pending)"
        ) from exc
    except Exception as exc:
        raise RuntimeError(f"JudgerActor of {judgers[0].judger_name!r} failed to start: {exc}") from exc
