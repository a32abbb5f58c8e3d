"""`judger score --ray`: a file's blocks scored by actors on every node of a Ray cluster.

The blocks of :mod:`judger.cli.shards` (whole lines, read as bytes and never decoded here) go to a
:class:`~judger.JudgerPool` of :class:`BlockActor`, one actor per free CPU of the cluster, spread
over its nodes. Each actor builds the command's judger once and scores a block as a shard process
does (:func:`judger.cli.shards.score_block`: read, judge, tally, encode); the blocks come back and
are taken in file order, so the output, the report and the exit code are those of one process.

The pool's dispatcher sends each block to the actor with the fewest in flight, two at most each
(one travels while the other is scored); a block whose actor is lost (its node gone, its process
dead, or its event loop hung past the block's deadline) is scored again on another actor, so a
node lost mid-run loses nothing. Every actor starts its interpreter with one hash secret
(``PYTHONHASHSEED``, drawn for the run), so that a prompt group split between two blocks is merged
as one group.

What crosses the network per block is its bytes out and its encoded output lines and tally back;
the driver only reads the file, writes the lines and merges the tallies.
"""

from __future__ import annotations

import asyncio
import math
import os
import secrets
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from judger.cli import shards
from judger.cli.shards import Block, BlockOptions, score_block
from judger.core.loops import LoopLocal
from judger.judgers.config import ComposedJudgerConfig, JudgerConfig, build_judger
from judger.remote.actor import JudgerActor

CALLS_PER_ACTOR = 2
"""Blocks an actor holds at once: one is scored while the next one travels."""
QUEUED_PER_ACTOR = 2
"""Blocks per actor the driver holds beyond those: waiting for an actor, or done and waiting for an
earlier block (results are taken in file order)."""
IN_FLIGHT_BYTES = 1 << 30
"""Input bytes the driver keeps out at once: blocks shrink below shards.BLOCK_BYTES on clusters
with more than 128 actors, so that every actor has its blocks and the driver's memory stays bounded."""
MIN_BLOCK_BYTES = 256 << 10
READY_TIMEOUT_S = 300.0
"""Actors build their judger (and, for MATH, their worker pool: Math-Verify's import) before work."""
_SPARE_CALLS = 8  # status probes beyond the blocks


def block_bytes(actors: int) -> int:
    """Bytes per block for ``actors`` actors (see :data:`IN_FLIGHT_BYTES`)."""
    fair = IN_FLIGHT_BYTES // ((CALLS_PER_ACTOR + QUEUED_PER_ACTOR) * max(1, actors))
    return min(shards.BLOCK_BYTES, max(MIN_BLOCK_BYTES, fair))


class BlockActor(JudgerActor):
    """A :class:`~judger.JudgerActor` that also scores whole blocks of a file (``score_block``).

    It builds the judger as the command does (``build_judger``: a composition, a router, the
    config's score floor) and starts the worker processes of its process-run scorers at once, sized
    to the CPU it reserved, so that they are ready when the first block comes.
    """

    def __init__(self, judger_config: Any, options: BlockOptions, pool_workers: int) -> None:
        import ray

        self.options = options
        self._pool_workers = pool_workers
        super().__init__(judger_config)
        context = ray.get_runtime_context()
        self.node = context.get_node_id()
        self.actor = context.get_actor_id() or ""

    def _build(self, judger_config: Any) -> Any:
        from judger.cli.pools import may_use_pool, size_process_pool

        size_process_pool(self._pool_workers)
        judger = build_judger(fitted(judger_config, self._pool_workers))
        if may_use_pool(judger):
            from judger.runtime.procpool.shared import shared_pool

            shared_pool().start()
        return judger

    async def score_block(self, block: tuple[int, bytes]) -> tuple[str, str, Block]:
        """``(actor id, node id, the block scored)``: where it ran travels with it (the progress
        bar counts nodes from it; an actor restarted elsewhere answers from its new node)."""
        first_number, data = block
        scored = await score_block(self.judger, self.options, first_number, data)
        self._calls += 1
        self._payloads += scored.rows
        return self.actor, self.node, scored

    async def stats(self) -> dict[str, Any]:
        return {**(await super().stats()), "actor": self.actor}

    async def aclose(self) -> None:
        from judger.cli.pools import close_shared_pool

        await super().aclose()
        close_shared_pool()


def fitted(cfg: Any, cpus: int) -> Any:
    """``cfg`` for an actor that holds ``cpus`` CPUs of its node: its code judgers (a branch, verl's
    code route) run at most that many sandboxes at once, not one per CPU of the node each
    (:meth:`~judger.presets.CodeJudgerConfig.fitted_to`)."""
    from judger.compat.verl.router import VerlDefaultJudgerConfig
    from judger.compat.verl.routes import route_config

    fit = getattr(cfg, "fitted_to", None)
    if callable(fit):
        return fit(cpus)
    if isinstance(cfg, ComposedJudgerConfig):
        branches = {name: fitted(branch, cpus) for name, branch in cfg.branches.items()}
        return cfg.model_copy(update={"branches": branches})
    if isinstance(cfg, VerlDefaultJudgerConfig):
        code = cfg.overrides.get("code", route_config("code", cfg.compat))
        return cfg.model_copy(update={"overrides": {**cfg.overrides, "code": fitted(code, cpus)}})
    return cfg


def refusal(cfg: Any) -> str | None:
    """Why ``cfg`` cannot be scored on actors, if it cannot."""
    if not isinstance(cfg, (JudgerConfig, ComposedJudgerConfig)):
        return (
            f"--ray needs a JudgerConfig or ComposedJudgerConfig to build on every node; the config "
            f"is a {type(cfg).__name__}, a judger already built in this process"
        )
    if isinstance(cfg, JudgerConfig) and cfg.cpu_resources is not None:
        return (
            "--ray starts judger actors of its own; the config's cpu_resources would start more inside "
            "each of them: drop cpu_resources from the config, or --ray"
        )
    return None


@dataclass
class RayBlocks:
    """The actors of a run (a JudgerPool of BlockActors) and where each one runs."""

    pool: Any
    started_ray: bool
    timeout_of: Callable[[int], float]
    block_size: int
    actor_of: list[str]  # replica index -> Ray actor id (kept across restarts)
    node_of: dict[str, str] = field(default_factory=dict)  # actor id -> the node it last answered from
    _slots: LoopLocal[asyncio.Semaphore] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._slots = LoopLocal(lambda: asyncio.Semaphore(CALLS_PER_ACTOR * self.actors))

    @property
    def actors(self) -> int:
        return len(self.actor_of)

    def nodes(self) -> int:
        """Nodes with a live actor of the run."""
        replicas = self.pool.dispatcher.replicas
        alive = (self.actor_of[i] for i, r in enumerate(replicas) if r.status()["state"] == "alive")
        return len({self.node_of[a] for a in alive if a in self.node_of})

    def status(self) -> str:
        nodes = self.nodes()
        return f"{nodes} node{'s' * (nodes != 1)}, {self.actors} actors"

    def lost_calls(self) -> int:
        """Calls that lost their actor (its node or process gone, or hung) and were made again."""
        return sum(r.lost_calls + r.hung_calls for r in self.pool.dispatcher.replicas)

    async def score(self, first_number: int, data: bytes) -> Block:
        lines = data.count(b"\n") + 1
        # a block waits here for a slot, woken alone, and not on the dispatcher's condition, where
        # every waiter is woken at each call's end (thousands of blocks, on a cluster of thousands
        # of actors, would each look over every actor at every call)
        async with self._slots.get():
            actor, node, block = await self.pool.dispatcher.run_one(
                (first_number, data), method="score_block", timeout=self.timeout_of(lines)
            )
        self.node_of[actor] = node
        return block

    def close(self) -> None:
        """Kill the actors (their worker processes die with them); disconnect from a Ray started here."""
        self.pool._kill_actors()
        if self.started_ray:
            import ray

            ray.shutdown()


def ship_by_value(config: str | None) -> None:
    """What a config file defines (its handlers, its config classes) travels to the actors by value:
    the nodes need not have the file, nor its folder on their path. Modules it imports from beside
    it still travel by reference (install them on the nodes)."""
    if not config:
        return
    import ray

    spec = config.rpartition(":")[0] if ":" in config and not config.endswith(".py") else config
    if not os.path.isfile(spec):
        return  # an import string: the module is importable, on the nodes too
    path = os.path.realpath(spec)
    for module in list(sys.modules.values()):
        source = getattr(module, "__file__", None)
        if source and os.path.realpath(source) == path:
            ray.cloudpickle.register_pickle_by_value(module)


def connect(address: str) -> bool:
    """Join the Ray at ``address`` (``auto``: the running cluster; ``local``: start one with this
    machine's CPUs); True when this call connected (and so should disconnect), False when Ray was
    initialised already (then it is used as it is)."""
    import ray

    if ray.is_initialized():
        return False
    # actors' log lines (a parser's warning) stay in Ray's logs: the command's stderr holds its own
    if address == "local":
        ray.init(
            address="local",
            num_cpus=os.cpu_count() or 1,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
    else:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    _ray_messages_to_stderr()
    return True


def _ray_messages_to_stderr() -> None:
    """Ray prints its error messages ("A worker died or was killed while executing a task...") on
    the driver's ``sys.stdout``, ``log_to_driver`` or not; this command's stdout carries its JSON
    report or its rows (``-o -``), which a pipeline reads. They go to stderr instead. Ray has no
    public switch for it: its printer is wrapped, for the rest of this process (a test checks that
    it still takes effect)."""
    from ray._private import worker

    printer = getattr(worker, "print_to_stdstream", None)
    if printer is None or getattr(printer, "judger_to_stderr", False):
        return

    def to_stderr(data: dict[str, Any], ignore_prefix: bool) -> None:
        printer({**data, "is_err": True}, ignore_prefix)

    to_stderr.judger_to_stderr = True  # type: ignore[attr-defined]
    worker.print_to_stdstream = to_stderr


def actor_count(workers: int | None) -> int:
    """Actors to start: one per free CPU of the cluster, at most ``workers``."""
    import ray

    free = int(ray.available_resources().get("CPU", 0.0))
    if free < 1:
        raise RuntimeError(
            "the Ray cluster has no free CPU for judger score's actors (ray status shows what holds them)"
        )
    return min(free, workers) if workers else free


def block_timeout(cfg: Any) -> Callable[[int], float]:
    """The deadline of a block of n lines: what the judger's own per-sample deadline allows it (rounds
    of ``max_concurrency`` samples, one more for the queue) plus a grace; it catches an actor whose
    event loop is stuck, never a slow block (each sample has its own deadline inside)."""
    from judger.remote.ray_judger import CALL_GRACE_S

    timeout = float(getattr(cfg, "timeout", 300.0))
    parallel = max(1, int(getattr(cfg, "max_concurrency", 64)))
    return lambda n: CALL_GRACE_S + timeout * (1 + math.ceil(n / parallel))


def start(
    cfg: Any, options: BlockOptions, address: str, *, workers: int | None = None, config: str | None = None
) -> RayBlocks:
    """Connect to Ray and start the run's actors, one per free CPU (at most ``workers``), each
    with its judger built; raises RuntimeError naming what could not start. ``config``: the ``-c``
    the config came from (see :func:`ship_by_value`)."""
    import ray

    from judger.remote.cluster import kill_actor, spawn_actor
    from judger.remote.pool import JudgerPool
    from judger.remote.remote_judger import RemoteJudger

    started = connect(address)
    ship_by_value(config)
    handles: list[Any] = []
    try:
        n = actor_count(workers)
        # 1..2**32-1: 0 would turn hash randomisation off, not choose a secret
        env = {"PYTHONHASHSEED": str(1 + secrets.randbelow(2**32 - 1))}
        for _ in range(n):
            handles.append(
                spawn_actor(
                    cfg,
                    num_cpus=1,
                    memory=None,
                    max_concurrency=CALLS_PER_ACTOR + _SPARE_CALLS,
                    actor_class=BlockActor,
                    args=(options, 1),
                    env_vars=env,
                )
            )
        stats = _wait_ready(handles)
        replicas = [RemoteJudger(actor=h, judger_name="judger score") for h in handles]
        pool = JudgerPool(replicas, judger_name="judger score", max_in_flight=CALLS_PER_ACTOR)
    except BaseException:
        for handle in handles:
            kill_actor(handle, restart=False)
        if started:
            ray.shutdown()
        raise
    running = RayBlocks(pool, started, block_timeout(cfg), block_bytes(n), [s["actor"] for s in stats])
    running.node_of.update({s["actor"]: s["node"] for s in stats})
    return running


def _wait_ready(handles: list[Any]) -> list[dict[str, Any]]:
    import ray
    from ray.exceptions import GetTimeoutError

    try:
        return list(ray.get([h.stats.remote() for h in handles], timeout=READY_TIMEOUT_S))
    except GetTimeoutError:
        raise RuntimeError(
            f"judger score's {len(handles)} Ray actors did not start within {READY_TIMEOUT_S:g} s; the "
            "cluster may lack the CPUs asked for (ray status shows what is pending)"
        ) from None
    except Exception as exc:
        cause = getattr(exc, "cause", None) or exc
        raise RuntimeError(
            f"the judger could not be built on the cluster: {type(cause).__name__}: {cause}"
        ) from None


async def score_file(
    running: RayBlocks, path: str, take: Callable[[Block], None], advance: Callable[[int], None]
) -> None:
    """Score ``path`` on the run's actors; ``take`` gets each block in file order."""
    pending: deque[asyncio.Future[Block]] = deque()
    window = (CALLS_PER_ACTOR + QUEUED_PER_ACTOR) * running.actors
    probe: int | None = None
    try:
        for first_number, data in shards.blocks(path, running.block_size):
            pending.append(asyncio.ensure_future(running.score(first_number, data)))
            if len(pending) >= window:
                probe = shards.accept(await pending.popleft(), probe, take, advance)
        while pending:
            probe = shards.accept(await pending.popleft(), probe, take, advance)
    finally:
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


def lost_note(running: RayBlocks) -> str | None:
    """A line for stderr when blocks were scored again because their actor was lost."""
    lost = running.lost_calls()
    if not lost:
        return None
    return (
        f"judger score: {lost} block(s) lost their Ray actor (a node lost, a process killed or hung) "
        "and were scored again on other actors; nothing was lost"
    )
