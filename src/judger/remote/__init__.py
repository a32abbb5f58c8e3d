"""Judgers on Ray: RemoteJudger (one actor), JudgerPool (several), JudgerActor, CPU resources.

Importing this package does not import Ray; each name loads its module on first use.
"""

from __future__ import annotations

from judger.core.lazy import lazy_exports

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

__all__ = sorted(_NAMES)

__getattr__ = lazy_exports(__name__, _NAMES)
