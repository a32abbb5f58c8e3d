"""A control group per sandbox: a task count and a memory ceiling the kernel enforces for any uid.

Each sandbox's processes are placed in a fresh cgroup (under the judge's own, in a
``judger-sandbox`` folder) before the first of the program's instructions runs, with ``pids.max``
(threads count: a raw ``clone(CLONE_THREAD)`` bomb stops there) and a memory limit over all of
its processes and its scratch tmpfs, swap included (v2 ``memory.swap.max``, v1
``memory.memsw.limit_in_bytes`` where swap is accounted) and, on v1, TCP buffers
(``memory.kmem.tcp.limit_in_bytes``: v1 charges a cgroup's sockets only once that is set; v2
counts them in ``memory.max``). At the end the host kills whatever is left in it (``cgroup.kill``
on cgroup v2; on v1 every listed process, until none is) and removes it.

Folders are named ``s-<judge pid>-<random>``. A live judge removes (:func:`sweep`) its own that no
live sandbox holds, and every empty one a minute old or older, whoever made it (a judge that died,
in this PID namespace or another sharing the hierarchy: a folder is empty before its sandbox is
placed in it only for the seconds of a start-up, and rmdir fails on one a process is in).

Both hierarchies are handled: v2 where the judge's cgroup delegates the ``pids`` controller (the
judge's own cgroup must then hold no process, or be the root), else v1's ``pids`` (and
``memory``) hierarchies where they are mounted and writable. Where neither can be had,
:func:`unavailable` says why; the sandbox then relies on the program's own uid and RLIMIT_NPROC.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

FOLDER = "judger-sandbox"
# an empty folder this old is left over: a sandbox is placed in its folder within its start-up
_STALE_S = 60.0
# what a sandbox's TCP sockets may hold on cgroup v1: the seccomp filter refuses them anyway
TCP_BYTES = 16 << 20
_live: set[str] = set()  # names of the folders of this process's sandboxes not yet removed


@dataclass(frozen=True)
class _Layout:
    version: int
    pids: str  # the judger-sandbox folder for the pids controller (v2: for all controllers)
    memory: str | None  # v1: the memory controller's folder, where mounted and writable


def _mounts() -> list[tuple[str, str, str, list[str]]]:
    """(mount point, root, fs type, super options) of every cgroup mount."""
    found = []
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) >= 5 and tail and tail[0] in ("cgroup", "cgroup2"):
                options = tail[2].split(",") if len(tail) > 2 else []
                found.append((fields[4], fields[3], tail[0], options))
    return found


def _own_paths() -> dict[str, str]:
    """controller -> this process's cgroup path ("" for the v2 hierarchy)."""
    paths = {}
    with open("/proc/self/cgroup") as handle:
        for line in handle:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                paths[controller] = path
    return paths


def _under(mount: str, root: str, path: str) -> str:
    relative = path[len(root) :] if root != "/" and path.startswith(root) else path
    return os.path.join(mount, relative.lstrip("/"))


def _ready_folder(parent: str, enable: str | None = None) -> str:
    folder = os.path.join(parent, FOLDER)
    os.makedirs(folder, exist_ok=True)
    if enable:
        with open(os.path.join(folder, "cgroup.subtree_control"), "w") as handle:
            handle.write(enable)
    return folder


def _v2(mount: str, root: str, own: str) -> _Layout:
    parent = _under(mount, root, own)
    with open(os.path.join(parent, "cgroup.controllers")) as handle:
        available = handle.read().split()
    if "pids" not in available:
        raise OSError(f"the pids controller is not delegated to {parent}")
    wanted = [c for c in ("pids", "memory") if c in available]
    with open(os.path.join(parent, "cgroup.subtree_control")) as handle:
        enabled = handle.read().split()
    missing = [c for c in wanted if c not in enabled]
    if missing:
        # fails (EBUSY) where the judge's own cgroup holds processes and is not the root
        with open(os.path.join(parent, "cgroup.subtree_control"), "w") as handle:
            handle.write(" ".join(f"+{c}" for c in missing))
    folder = _ready_folder(parent, " ".join(f"+{c}" for c in wanted))
    return _Layout(2, folder, None)


def _v1(mounts: list[tuple[str, str, str, list[str]]], own: dict[str, str]) -> _Layout:
    folders: dict[str, str] = {}
    for controller in ("pids", "memory"):
        for mount, root, fstype, options in mounts:
            if fstype == "cgroup" and controller in options and controller in own:
                with contextlib.suppress(OSError):
                    folders[controller] = _ready_folder(_under(mount, root, own[controller]))
                break
    if "pids" not in folders:
        raise OSError("no writable cgroup v1 pids hierarchy")
    return _Layout(1, folders["pids"], folders.get("memory"))


@functools.lru_cache(maxsize=1)
def _layout() -> _Layout | str:
    """The hierarchy to use, or why none can be had (cached: probed once per process)."""
    try:
        mounts, own = _mounts(), _own_paths()
    except OSError as exc:
        return f"cannot read this process's cgroups ({exc})"
    reasons = []
    for mount, root, fstype, _ in mounts:
        if fstype == "cgroup2" and "" in own:
            try:
                return _v2(mount, root, own[""])
            except OSError as exc:
                reasons.append(f"cgroup v2 at {mount}: {exc}")
    try:
        return _v1(mounts, own)
    except OSError as exc:
        reasons.append(f"cgroup v1: {exc}")
    return "; ".join(reasons) or "no cgroup hierarchy is mounted"


def unavailable() -> str:
    """ "" when sandboxes get a cgroup here, else why not."""
    layout = _layout()
    return layout if isinstance(layout, str) else ""


class SandboxCgroup:
    """The cgroup(s) of one sandbox: one folder on v2, one per controller on v1."""

    def __init__(self, layout: _Layout, name: str) -> None:
        self.version = layout.version
        self.name = name
        self.folders = [os.path.join(layout.pids, name)]
        if layout.memory is not None:
            self.folders.append(os.path.join(layout.memory, name))

    def _write(self, folder: str, name: str, value: str) -> None:
        with open(os.path.join(folder, name), "w") as handle:
            handle.write(value)

    def create(self, tasks: int, memory_bytes: int) -> None:
        _live.add(self.name)
        for folder in self.folders:
            os.mkdir(folder, 0o700)
        self._write(self.folders[0], "pids.max", str(tasks))
        if self.version == 2:
            with contextlib.suppress(FileNotFoundError):  # no memory controller delegated
                self._write(self.folders[0], "memory.max", str(memory_bytes))
                self._write(self.folders[0], "memory.swap.max", "0")
        elif len(self.folders) > 1:
            memory = self.folders[1]
            self._write(memory, "memory.limit_in_bytes", str(memory_bytes))
            # absent where the kernel does not account swap / TCP per cgroup (docs/tasks/untrusted-code.md)
            with contextlib.suppress(FileNotFoundError):
                self._write(memory, "memory.memsw.limit_in_bytes", str(memory_bytes))
            with contextlib.suppress(FileNotFoundError):
                self._write(memory, "memory.kmem.tcp.limit_in_bytes", str(TCP_BYTES))

    def attach(self, pid: int) -> None:
        """Move ``pid`` (not yet running the program) into every folder."""
        for folder in self.folders:
            self._write(folder, "cgroup.procs", str(pid))

    def members(self) -> list[int]:
        try:
            with open(os.path.join(self.folders[0], "cgroup.procs")) as handle:
                return [int(line) for line in handle if line.strip()]
        except OSError:
            return []

    def kill(self) -> None:
        """SIGKILL everything in it (a few rounds on v1, where a fork can race the listing)."""
        if self.version == 2:
            with contextlib.suppress(OSError):
                self._write(self.folders[0], "cgroup.kill", "1")
                return
        for _ in range(20):
            members = self.members()
            if not members:
                return
            for pid in members:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)

    def remove(self) -> bool:
        """Remove the folders; False while a dying process still holds one."""
        done = True
        for folder in self.folders:
            try:
                os.rmdir(folder)
            except FileNotFoundError:
                pass
            except OSError:
                done = False
        if done:
            _live.discard(self.name)
        return done


def _sweep(layout: _Layout, doomed: Callable[[str, str], bool]) -> None:
    """Remove the empty folders ``doomed(name, path)`` picks (rmdir fails while a process is in one)."""
    for parent in (layout.pids, layout.memory):
        if parent is None:
            continue
        with contextlib.suppress(OSError):
            for name in os.listdir(parent):
                path = os.path.join(parent, name)
                with contextlib.suppress(OSError):
                    if name.startswith("s-") and os.path.isdir(path) and doomed(name, path):
                        os.rmdir(path)


def _left_over(prefix: str) -> Callable[[str, str], bool]:
    def doomed(name: str, path: str) -> bool:
        if name in _live:
            return False
        return name.startswith(prefix) or time.time() - os.stat(path).st_mtime > _STALE_S

    return doomed


@functools.lru_cache(maxsize=1)
def _swept(layout: _Layout) -> bool:
    _sweep(layout, _left_over(f"s-{os.getpid()}-"))
    return True


def sweep() -> None:
    """Remove the empty folders left over: this judge's that no live sandbox holds (a sample whose
    teardown never ran), and anyone's a minute old (a judge that died)."""
    layout = _layout()
    if not isinstance(layout, str):
        _sweep(layout, _left_over(f"s-{os.getpid()}-"))


def create(tasks: int, memory_bytes: int) -> SandboxCgroup | None:
    """A fresh cgroup with these limits, or None where cgroups cannot be had (see :func:`unavailable`)."""
    layout = _layout()
    if isinstance(layout, str):
        return None
    _swept(layout)
    group = SandboxCgroup(layout, f"s-{os.getpid()}-{secrets.token_hex(6)}")
    try:
        group.create(tasks, memory_bytes)
    except OSError:
        group.remove()
        raise
    return group
