"""Judgers on Ray: RemoteJudger (one actor), JudgerPool (several), JudgerActor, CPU resources.

Importing this package does not import Ray; each name loads its module on first use.
"""

from __future__ import annotations

from judger.core.lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:  # the lazy names below, for type checkers, IDEs and the API reference
    from judger.remote.actor import JudgerActor
    from judger.remote.pool import JudgerPool
    from judger.remote.remote_judger import RemoteJudger
    from judger.remote.resources import (
        CPUResourceManager,
        clear_cpu_resource_manager,
        get_cpu_resource_manager,
        register_cpu_resources,
        set_cpu_resource_manager,
    )

_NAMES: dict[str, str] = {
    "RemoteJudger": "judger.remote.remote_judger",
    "JudgerPool": "judger.remote.pool",
    "JudgerActor": "judger.remote.actor",
    "CPUResourceManager": "judger.remote.resources",
    # XTuner's module-level functions around the process-global manager
    "set_cpu_resource_manager": "judger.remote.resources",
    "get_cpu_resource_manager": "judger.remote.resources",
    "clear_cpu_resource_manager": "judger.remote.resources",
    "register_cpu_resources": "judger.remote.resources",
}

# a literal list, so that linters and the API reference read it without running this file
__all__ = [
    "CPUResourceManager",
    "JudgerActor",
    "JudgerPool",
    "RemoteJudger",
    "clear_cpu_resource_manager",
    "get_cpu_resource_manager",
    "register_cpu_resources",
    "set_cpu_resource_manager",
]

__getattr__ = lazy_exports(__name__, _NAMES)
