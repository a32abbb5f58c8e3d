"""A sandbox's channel under uvloop (the loop of uvicorn, vLLM and verl's servers): each descriptor
is closed once, so a file another part of the judge opens meanwhile is never shut under it."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from judger.runtime.sandbox import bwrap, runner
from judger.runtime.sandbox.runner import SandboxLimits
from judger.scorers.code import score_async

uvloop = pytest.importorskip("uvloop")

# py310: where the double close was first seen (the SandboxFusion test under Python 3.10)
pytestmark = pytest.mark.py310

LIMITS = SandboxLimits(wall_s=5.0, cpu_s=5.0, memory_mb=512, output_mb=16, scratch_mb=64)


def test_files_opened_as_a_sandbox_is_released_stay_open(monkeypatch: pytest.MonkeyPatch) -> None:
    if bwrap.probe():
        pytest.skip(f"bubblewrap unavailable: {bwrap.probe()}")
    grabbed: list[int] = []
    release = runner._Sandbox.release

    def release_then_open(self: Any) -> Any:
        done = release(self)
        # another thread of the judge opening files right then gets the lowest numbers free: the
        # ones the sandbox's channel just gave back, if it gave them back while a transport still
        # meant to close them (uvloop closes a pipe's fd, then its file object, a turn later)
        grabbed.extend(os.open(os.devnull, os.O_RDONLY) for _ in range(6))
        return done

    monkeypatch.setattr(runner._Sandbox, "release", release_then_open)

    async def judge() -> None:
        program = "```python\nprint(int(input()) * 2)\n```"
        for _ in range(3):
            assert (await score_async(program, {"inputs": ["21"], "outputs": ["42"]}, limits=LIMITS))[
                "score"
            ] == 1.0
        await asyncio.sleep(0.2)  # the loop's deferred closes run

    try:
        uvloop.run(judge())
        assert grabbed, "no sandbox was released"
        lost = [fd for fd in grabbed if not _is_devnull(fd)]
        assert lost == [], f"descriptors closed under their owner: {lost}"
    finally:
        for fd in grabbed:
            try:
                os.close(fd)
            except OSError:
                pass


def _is_devnull(fd: int) -> bool:
    try:
        return os.readlink(f"/proc/self/fd/{fd}") == os.devnull
    except OSError:
        return False
