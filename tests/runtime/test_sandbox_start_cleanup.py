"""A sandbox that fails before its process starts gives back all it took: pipes, its uid lease."""

from __future__ import annotations

import os

import pytest

from judger.runtime.sandbox import bwrap, runner, uids
from judger.runtime.sandbox.runner import SandboxLimits, SandboxStartError


class _Lease:
    def __init__(self) -> None:
        self.uid = uids.FIRST_UID
        self.released = 0

    def release(self) -> None:
        self.released += 1


def _open_fds() -> set[int]:
    return {int(fd) for fd in os.listdir("/proc/self/fd")}


@pytest.mark.parametrize("seccomp", [True, False])
async def test_a_cgroup_that_cannot_be_made_leaks_no_descriptor_and_no_uid(
    seccomp: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # each leaked lease keeps a uid slot locked for the life of the process: enough failed starts
    # and no sandbox could start at all
    lease = _Lease()
    monkeypatch.setattr(runner, "require_isolation", lambda isolation: None)
    monkeypatch.setattr(runner, "filter_program", lambda: b"\0" * 8 if seccomp else None)
    monkeypatch.setattr(bwrap, "drops_to_own_uid", lambda: True)
    monkeypatch.setattr(uids, "lease", lambda: lease)

    def no_cgroup(limits: SandboxLimits) -> None:
        raise SandboxStartError("the sandbox's cgroup could not be made: no room")

    monkeypatch.setattr(runner, "_cgroup", no_cgroup)
    before = _open_fds()
    with pytest.raises(SandboxStartError, match="cgroup"):
        await runner._start({}, SandboxLimits(isolation="bwrap"))
    assert _open_fds() - before == set()
    assert lease.released == 1
