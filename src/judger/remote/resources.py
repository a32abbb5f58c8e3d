"""The process-global registry of CPU worker pools that judgers reserve outside placement groups.

A trainer's accelerator workers sit in Ray placement groups; judger actors run beside them on the
CPUs left over. Every Ray-backed judger registers its pool here when it is built, and the
registration fails fast, before any actor is started, when all registered pools together would not
fit what the cluster has outside placement groups. An actor that can never be scheduled would
otherwise sit pending and stall the first training step instead of failing the build.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from judger.judgers.config import CPUResourcesConfig

_GIB = 1024**3


@dataclass(frozen=True)
class ClusterCapacity:
    """What the cluster offers judger pools: totals, minus what placement groups hold."""

    total_cpus: float
    total_memory: float
    reserved_cpus: float
    reserved_memory: float
    largest_node_cpus: float
    largest_node_memory: float

    @property
    def free_cpus(self) -> float:
        return self.total_cpus - self.reserved_cpus

    @property
    def free_memory(self) -> float:
        return self.total_memory - self.reserved_memory


def ray_cluster_capacity() -> ClusterCapacity:
    """Read the live Ray cluster: alive nodes' CPU/memory, minus non-removed placement groups."""
    import ray
    from ray.util import placement_group_table

    nodes = [n for n in ray.nodes() if n.get("Alive")]
    cpus = [float(n.get("Resources", {}).get("CPU", 0.0)) for n in nodes]
    memory = [float(n.get("Resources", {}).get("memory", 0.0)) for n in nodes]
    reserved_cpus = reserved_memory = 0.0
    for group in placement_group_table().values():
        if group.get("state") == "REMOVED":
            continue
        for bundle in group.get("bundles", {}).values():
            reserved_cpus += float(bundle.get("CPU", 0.0))
            reserved_memory += float(bundle.get("memory", 0.0))
    return ClusterCapacity(
        total_cpus=sum(cpus),
        total_memory=sum(memory),
        reserved_cpus=reserved_cpus,
        reserved_memory=reserved_memory,
        largest_node_cpus=max(cpus, default=0.0),
        largest_node_memory=max(memory, default=0.0),
    )


def _gib(n: float) -> str:
    return f"{n / _GIB:.2f} GiB"


class CPUResourceManager:
    """Registry of judger CPU pools (``name -> CPUResourcesConfig``), one per process.

    ``register(name, cfg)`` makes the name unique (``judger``, ``judger#2``, ...), then checks that
    the sum over all registered pools of ``workers x cpus`` and ``workers x memory`` fits the
    cluster minus its placement groups, and that one worker fits the largest node. On failure the
    registration is rolled back and ``RuntimeError`` says what was asked and what the cluster has.

    Unlike XTuner, building a Ray-backed judger with no manager does not raise: the first build
    creates the process-global manager over the Ray cluster in use (:meth:`instance`), since the
    capacity it checks against is read from Ray itself and needs no setup by the trainer.

    XTuner's constructor ``CPUResourceManager(accelerator_placement_groups=...)`` is accepted: the
    capacity subtracts every live placement group, so the accelerator groups named there (and any
    other group, whose CPUs judger actors cannot use either) are always held back. XTuner's
    module functions :func:`set_cpu_resource_manager`, :func:`get_cpu_resource_manager`,
    :func:`clear_cpu_resource_manager` and :func:`register_cpu_resources` act on the process-global
    manager.
    """

    _global: ClassVar[CPUResourceManager | None] = None
    _global_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        accelerator_placement_groups: Any = None,
        capacity: Callable[[], ClusterCapacity] = ray_cluster_capacity,
    ) -> None:
        if callable(accelerator_placement_groups) and not hasattr(
            accelerator_placement_groups, "bundle_specs"
        ):
            # judger's earlier positional form: CPUResourceManager(capacity_fn)
            accelerator_placement_groups, capacity = None, accelerator_placement_groups
        self.accelerator_placement_groups = _as_groups(accelerator_placement_groups)
        self._capacity = capacity
        self._pools: dict[str, CPUResourcesConfig] = {}
        self._lock = threading.Lock()

    # --- the process-global instance -------------------------------------------------------------

    @classmethod
    def instance(cls) -> CPUResourceManager:
        """The process-global manager, created on first use."""
        with cls._global_lock:
            if cls._global is None:
                cls._global = cls()
            return cls._global

    @classmethod
    def initialize(cls, capacity: Callable[[], ClusterCapacity] = ray_cluster_capacity) -> CPUResourceManager:
        """Create (or replace) the process-global manager, e.g. with a custom capacity source."""
        with cls._global_lock:
            cls._global = cls(capacity=capacity)
            return cls._global

    @classmethod
    def set_instance(cls, manager: CPUResourceManager | None) -> None:
        """Install ``manager`` as the process-global one (None: forget it; the next build makes one)."""
        if manager is not None and not isinstance(manager, CPUResourceManager):
            raise TypeError(f"expected a CPUResourceManager or None, got {type(manager).__name__}")
        with cls._global_lock:
            cls._global = manager

    @classmethod
    def is_initialized(cls) -> bool:
        return cls._global is not None

    # --- registrations ---------------------------------------------------------------------------

    def register(self, name: str, cfg: CPUResourcesConfig) -> str:
        """Reserve ``cfg`` under a unique form of ``name``; return that name. Raises RuntimeError."""
        with self._lock:
            unique = name
            suffix = 2
            while unique in self._pools:
                unique = f"{name}#{suffix}"
                suffix += 1
            self._pools[unique] = cfg
            try:
                self._validate(unique, cfg)
            except BaseException:
                del self._pools[unique]
                raise
            return unique

    def release(self, name: str) -> bool:
        """Drop a registration; True if it existed. Safe to call twice."""
        with self._lock:
            return self._pools.pop(name, None) is not None

    def registrations(self) -> dict[str, CPUResourcesConfig]:
        with self._lock:
            return dict(self._pools)

    @property
    def pools(self) -> dict[str, CPUResourcesConfig]:
        """XTuner's name for :meth:`registrations`."""
        return self.registrations()

    def get(self, name: str) -> CPUResourcesConfig:
        """The pool registered as ``name`` (XTuner's ``get``); KeyError naming the known pools."""
        with self._lock:
            if name not in self._pools:
                raise KeyError(
                    f"Unknown external CPU resource pool {name!r}. Available pools: {sorted(self._pools)}"
                )
            return self._pools[name]

    def _validate(self, name: str, cfg: CPUResourcesConfig) -> None:
        cap = self._capacity()
        asked = (
            f"{name!r} asks for {cfg.num_workers} worker(s) x {cfg.num_cpus_per_worker:g} CPU and "
            f"{_gib(cfg.cpu_memory_per_worker)}"
        )
        if cfg.num_cpus_per_worker > cap.largest_node_cpus:
            raise RuntimeError(
                f"Insufficient CPU resources: {asked}, but the largest node has only "
                f"{cap.largest_node_cpus:g} CPUs, so one worker can never be scheduled"
            )
        if cfg.cpu_memory_per_worker > cap.largest_node_memory:
            raise RuntimeError(
                f"Insufficient memory resources: {asked}, but the largest node has only "
                f"{_gib(cap.largest_node_memory)} of Ray memory, so one worker can never be scheduled"
            )
        want_cpus = sum(p.num_workers * p.num_cpus_per_worker for p in self._pools.values())
        want_memory = sum(p.num_workers * p.cpu_memory_per_worker for p in self._pools.values())
        others = len(self._pools) - 1
        together = f" (with {others} other registered judger pool(s))" if others else ""
        if want_cpus > cap.free_cpus + 1e-9:
            raise RuntimeError(
                f"Insufficient CPU resources: {asked}; all judger pools together{together} need "
                f"{want_cpus:g} CPUs, but the cluster has {cap.free_cpus:g} outside placement groups "
                f"({cap.total_cpus:g} total, {cap.reserved_cpus:g} held by placement groups)"
            )
        if want_memory > cap.free_memory:
            raise RuntimeError(
                f"Insufficient memory resources: {asked}; all judger pools together{together} need "
                f"{_gib(want_memory)}, but the cluster has {_gib(cap.free_memory)} outside placement "
                f"groups ({_gib(cap.total_memory)} total, {_gib(cap.reserved_memory)} held by them)"
            )


def _as_groups(groups: Any) -> tuple[Any, ...]:
    if groups is None:
        return ()
    if hasattr(groups, "bundle_specs"):
        return (groups,)
    return tuple(groups)


# --- XTuner's module-level functions over the process-global manager -----------------------------


def set_cpu_resource_manager(manager: CPUResourceManager | None) -> None:
    """Install the process-global manager (XTuner's function); None clears it."""
    CPUResourceManager.set_instance(manager)


def get_cpu_resource_manager() -> CPUResourceManager | None:
    """The process-global manager, or None when none is installed yet (XTuner's function)."""
    return CPUResourceManager._global


def clear_cpu_resource_manager() -> None:
    """Forget the process-global manager (XTuner's function); a later build creates a fresh one."""
    CPUResourceManager.set_instance(None)


def register_cpu_resources(name: str, cpu_resources: CPUResourcesConfig) -> str:
    """Register a pool with the process-global manager (created if none is installed, where XTuner
    raises ValueError); returns the unique name it got. RuntimeError when the cluster cannot hold it."""
    return CPUResourceManager.instance().register(name, cpu_resources)
