"""Small reward handlers with known behaviour, importable by string ("judger.testing.handlers:...")."""

from __future__ import annotations

import time
from typing import Any


def exact_match(response: str | None, label: Any, extra_info: dict[str, Any]) -> dict[str, Any]:
    """1.0 when the stripped response equals ``str(label)``; also reports ``acc`` and ``pred``."""
    pred = (response or "").strip()
    acc = pred == str(label).strip()
    return {"score": 1.0 if acc else 0.0, "acc": acc, "pred": pred}


def sleepy(response: str | None, label: Any, extra_info: dict[str, Any]) -> dict[str, Any]:
    """Sleeps ``extra_info["sleep"]`` seconds, then scores like :func:`exact_match`."""
    time.sleep(float(extra_info.get("sleep", 0.0)))
    return exact_match(response, label, extra_info)


def crashing(response: str | None, label: Any, extra_info: dict[str, Any]) -> dict[str, Any]:
    """Kills its own process when the response is "crash" (a stand-in for a segfaulting scorer)."""
    if response == "crash":
        import os

        os._exit(3)
    return exact_match(response, label, extra_info)


def report_pid(response: str | None, label: Any, extra_info: dict[str, Any]) -> dict[str, Any]:
    """Scores 1.0 and reports the id of the process it ran in."""
    import os

    return {"score": 1.0, "pid": os.getpid()}
