"""Small reward handlers with known behaviour, importable by string ("judger.testing.handlers:...")."""

from __future__ import annotations

import time
from typing import Any

from judger.judgers.handlers import batch_handler


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


def _note_process(extra_info: dict[str, Any]) -> None:
    """Leave a file named ``<pid>-<thread id>`` in the folder ``extra_info["pids"]``, when given."""
    import os
    import threading
    from pathlib import Path

    folder = extra_info.get("pids")
    if folder:
        Path(folder, f"{os.getpid()}-{threading.get_native_id()}").touch()


def spinning(response: str | None, label: Any, extra_info: dict[str, Any]) -> dict[str, Any]:
    """For the response "spin", notes where it runs (:func:`_note_process`) and then burns CPU for
    good, as a scorer stuck in a loop does; otherwise scores like :func:`exact_match`."""
    if response == "spin":
        _note_process(extra_info)
        while True:
            pass
    return exact_match(response, label, extra_info)


@batch_handler
def batch_spinning(
    responses: list[str | None], labels: list[Any], extra_infos: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """A batch handler that spins as :func:`spinning` does when any response is "spin"."""
    if "spin" in responses:
        _note_process(extra_infos[0])
        while True:
            pass
    return [exact_match(r, lab, info) for r, lab, info in zip(responses, labels, extra_infos)]
