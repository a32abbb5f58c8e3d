"""The bubblewrap command line that confines one sample, and whether bubblewrap works here.

Each sample gets new user, PID, mount, IPC, UTS, network and cgroup namespaces; uid/gid 65534
without capabilities and with ``no_new_privs``, which is never host root: a root judge runs the
sandbox under a host uid of its own (:mod:`.uids`, two stages, see :func:`command`); the system
(``/usr`` and the Python installation only: no ``/etc``, ``/home``, ``/root``, ``/run``) mounted
read-only; a private tmpfs at ``/tmp`` as scratch and working directory, capped in bytes and (for
a root judge) in inodes; no pty of the machine's pool unless asked (``/dev/pts`` is an empty
read-only folder); the rest of the root read-only; the supervisor as pid 1 (``--as-pid-1``);
``--die-with-parent`` and ``--new-session``; the seccomp filter of
:mod:`judger.runtime.sandbox.seccomp`. Nothing of the host's environment is passed in.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import time

from judger.core.errors import JudgerError

INSIDE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "inside")
MOUNT_POINT = "/opt/judger-sandbox"
SCRATCH = "/tmp"
SANDBOX_UID = 65534
INSTALL_HINT = (
    "install bubblewrap: `apt-get install -y bubblewrap` as root "
    "(Debian/Ubuntu; `make sandbox-deps` does it), "
    "or `dnf install bubblewrap` / `apk add bubblewrap`; as a non-root user the kernel must also allow "
    "unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 / "
    "kernel.apparmor_restrict_unprivileged_userns=0)"
)


# a uid of the range sandboxes run under, for the start-up probe only
PROBE_UID = 0x7FFD0000
USERNS_HINT = (
    "sysctl kernel.unprivileged_userns_clone=1 on Debian before 11, "
    "kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu 23.10+, user.max_user_namespaces > 0"
)


class IsolationUnavailable(JudgerError, RuntimeError):
    """Kernel isolation cannot run here; code is refused rather than run unconfined."""


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    return args


def _python_binds() -> list[str]:
    roots: list[str] = []
    for path in (
        sys.prefix,
        sys.base_prefix,
        os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))),
    ):
        real = os.path.realpath(path)
        if real == "/usr" or real.startswith("/usr/") or real == "/":
            continue
        if not any(real == r or real.startswith(r + os.sep) for r in roots):
            roots.append(real)
        if path != real and path not in roots:
            roots.append(path)  # a venv reached through a symlinked path
    args: list[str] = []
    for root in roots:
        args += ["--ro-bind", root, inside_path(root)]
    return args


# Host paths under the scratch mount point (a venv in a temp dir, a CI clone under /tmp) would be
# hidden by the scratch tmpfs, or show up in it: they are bound under this prefix instead.
RELOCATED = "/opt/judger-host"


def inside_path(path: str) -> str:
    """Where host ``path`` (of the Python install) appears inside the sandbox."""
    if path == SCRATCH or path.startswith(SCRATCH + os.sep):
        return RELOCATED + path
    return path


@functools.lru_cache(maxsize=1)
def _options() -> frozenset[str]:
    """The options this bubblewrap knows (``--disable-userns`` is 0.8+, ``--size`` 0.7+)."""
    try:
        done = subprocess.run(["bwrap", "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    return frozenset(word for word in (done.stdout + done.stderr).split() if word.startswith("--"))


def _parents(binds: list[str]) -> list[str]:
    """``--perms 0755 --dir`` for each folder above a bound path (bubblewrap run by root makes them
    0700, which the unprivileged second stage could not cross)."""
    targets = [binds[i + 2] for i, word in enumerate(binds) if word in ("--ro-bind", "--symlink")]
    found: list[str] = []
    for target in targets:
        parent = os.path.dirname(target)
        chain = []
        while parent not in ("/", "") and parent not in found:
            chain.append(parent)
            parent = os.path.dirname(parent)
        found += reversed(chain)
    args: list[str] = []
    for folder in found:
        if not any(folder == t or folder.startswith(t + os.sep) for t in targets):
            args += ["--perms", "0755", "--dir", folder]
    return args


def _mounts() -> list[str]:
    binds = [*_system_binds(), *_python_binds(), "--ro-bind", INSIDE_DIR, MOUNT_POINT]
    return [*_parents(binds), *binds]


_CONFINE = [
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--die-with-parent",
    "--new-session",
    # the supervisor is pid 1: no bubblewrap init the program could write into, and the whole PID
    # namespace dies with it
    "--as-pid-1",
    "--hostname",
    "sandbox",
]


def _inner(scratch: list[str], ptys: bool) -> list[str]:
    # bubblewrap's /dev mounts a devpts of its own, whose ptys are still counted against the
    # machine's one pool (kernel.pty.max): an empty folder over it leaves /dev/ptmx dangling
    no_ptys = [] if ptys else ["--tmpfs", "/dev/pts", "--remount-ro", "/dev/pts"]
    return [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        *no_ptys,
        *scratch,
        "--remount-ro",
        "/",
        "--remount-ro",
        "/dev",
        "--chdir",
        SCRATCH,
        "--clearenv",
        "--setenv",
        "PATH",
        "/usr/bin:/bin",
        "--setenv",
        "HOME",
        SCRATCH,
        "--setenv",
        "LANG",
        "C.UTF-8",
    ]


def _scratch_mount(scratch_bytes: int, scratch_inodes: int, host_uid: int) -> list[str]:
    """The first stage's command prefix that mounts the scratch tmpfs, owned by ``host_uid``: the
    mount options bubblewrap's ``--tmpfs`` cannot give (``nr_inodes``: bytes alone let a program
    make a million empty folders, whose teardown then takes seconds)."""
    owner = f"uid={host_uid},gid={host_uid}"
    options = f"nosuid,nodev,mode=0700,size={scratch_bytes},nr_inodes={scratch_inodes},{owner}"
    script = f'{MOUNT} -t tmpfs -o {options} judger-scratch {SCRATCH} && exec "$@"'
    return [SHELL, "-c", script, "judger-scratch"]


def command(
    *,
    scratch_bytes: int,
    seccomp_fd: int | None,
    host_uid: int | None = None,
    info_fd: int | None = None,
    block_fd: int | None = None,
    scratch_inodes: int = 16384,
    ptys: bool = False,
) -> list[str]:
    """argv that runs the supervisor under bubblewrap (the job goes to its stdin).

    With ``host_uid`` (the judge is root) in two stages: bubblewrap as root builds the read-only
    root in a mount and network namespace of its own, then ``setpriv`` drops to ``host_uid`` for
    good and an unprivileged bubblewrap makes the user namespace (sandbox uid 65534 = host
    ``host_uid``), the PID, IPC and UTS namespaces, ``/proc``, ``/dev`` and the scratch. Without
    it, one bubblewrap does all of it and the sandbox uid is the judge's own (not root).
    ``info_fd`` / ``block_fd``: bubblewrap writes the host pid of the sandbox's first process (the
    first stage's init, or the supervisor) to the first and waits on the second before going on, so
    the host can place it in a cgroup first; killing that process kills the whole sandbox.
    ``scratch_inodes`` bounds the scratch's inodes where the first stage mounts it (a root judge;
    bubblewrap's own ``--tmpfs`` takes a size only); ``ptys`` leaves the sandbox its devpts.
    """
    executable = shutil.which("bwrap") or "bwrap"
    handshake: list[str] = []
    if info_fd is not None:
        handshake += ["--info-fd", str(info_fd)]
    if block_fd is not None:
        handshake += ["--block-fd", str(block_fd)]
    seccomp = [] if seccomp_fd is None else ["--seccomp", str(seccomp_fd)]
    user = ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
    # no nested user namespaces where this bubblewrap can say so (older ones: the seccomp filter
    # refuses unshare and clone with namespace flags)
    user += ["--disable-userns"] if "--disable-userns" in _options() else []
    supervisor = [inside_path(sys.executable), "-I", f"{MOUNT_POINT}/supervisor.py"]
    if host_uid is None:
        return [
            executable,
            *user,
            "--unshare-net",
            *_CONFINE,
            *_mounts(),
            *_inner(["--size", str(scratch_bytes), "--tmpfs", SCRATCH], ptys),
            *seccomp,
            *handshake,
            *supervisor,
        ]
    # the first stage has a PID namespace of its own, whose init (root, out of the program's sight)
    # dies with bubblewrap and so with the judge, taking every process below it along: the
    # unprivileged second stage's own parent-death signal is lost in setpriv's change of uid
    first = [
        executable,
        "--unshare-net",
        "--unshare-pid",
        "--die-with-parent",
        *_mounts(),
        "--dev",
        "/dev",
        # the host's /proc, whole, for the second stage: the kernel lets a user namespace mount a
        # new proc only where one is fully visible; the sandbox's own /proc covers it
        "--bind",
        "/proc",
        "/proc",
        "--dir",
        SCRATCH,
        "--remount-ro",
        "/",
    ]
    drop = [SETPRIV, f"--reuid={host_uid}", f"--regid={host_uid}", "--clear-groups", "--"]
    # the scratch the first stage mounted, read-write again under the read-only root
    inner = _inner(["--bind", SCRATCH, SCRATCH], ptys)
    second = [executable, *user, *_CONFINE, "--ro-bind", "/", "/", *inner, *seccomp]
    scratch = _scratch_mount(scratch_bytes, scratch_inodes, host_uid)
    return [*first, *handshake, *scratch, *drop, *second, *supervisor]


SETPRIV = shutil.which("setpriv") or "/usr/bin/setpriv"
MOUNT = shutil.which("mount") or "/usr/bin/mount"
SHELL = shutil.which("sh") or "/bin/sh"


def drops_to_own_uid() -> bool:
    """Whether sandboxes run under a uid of their own (the judge is root), not the judge's."""
    return os.geteuid() == 0


@functools.lru_cache(maxsize=1)
def probe() -> str:
    """ "" when bubblewrap confines programs here, else why not and what to do (cached)."""
    if shutil.which("bwrap") is None:
        return f"bubblewrap (bwrap) is not installed; {INSTALL_HINT}"
    if "--size" not in _options() or "--as-pid-1" not in _options():
        return "this bubblewrap is too old (--size and --as-pid-1 need bubblewrap >= 0.7)"
    host_uid = None
    if drops_to_own_uid():
        if not os.access(SETPRIV, os.X_OK):
            return (
                "the judge runs as root and a judged program must not: setpriv (util-linux) is needed "
                "to drop to an unprivileged uid; install util-linux"
            )
        if not (os.access(MOUNT, os.X_OK) and os.access(SHELL, os.X_OK)):
            return (
                "the judge runs as root: mount (util-linux) and sh are needed to give the sandbox a "
                "scratch bounded in inodes; install util-linux"
            )
        host_uid = PROBE_UID
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe()
    argv = command(
        scratch_bytes=1 << 20, seccomp_fd=None, host_uid=host_uid, info_fd=info_w, block_fd=block_r
    )
    # the probe waits on its stdin, so that the host can see which uid it runs under
    argv[-2:] = ["-I", "-c", "import os, sys; assert os.getuid() == 65534; sys.stdin.read()"]
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            pass_fds=(info_w, block_r),
            env={"PATH": os.defpath},
        )
    except OSError as exc:
        for fd in (info_r, info_w, block_r, block_w):
            os.close(fd)
        return f"bubblewrap failed to start: {exc}; {INSTALL_HINT}"
    os.close(info_w)
    os.close(block_r)
    first = _read_child_pid(info_r)
    os.close(block_w)
    uids = _probe_uids(first, proc) if first is not None else set()
    try:
        _, stderr = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return f"bubblewrap did not finish within 30 s; {INSTALL_HINT}"
    if proc.returncode != 0:
        reason = stderr.decode("utf-8", "replace").strip()[-500:] or f"exit {proc.returncode}"
        if host_uid is not None:
            return (
                f"bubblewrap cannot create the sandbox under an unprivileged uid here ({reason}); "
                f"the judge runs as root, so it needs unprivileged user namespaces ({USERNS_HINT})"
            )
        return f"bubblewrap cannot create the sandbox here ({reason}); {INSTALL_HINT}"
    if not uids or 0 in uids:
        return f"the sandboxed interpreter did not run under an unprivileged host uid (seen: {sorted(uids)})"
    return ""


def child_pid(info: bytes) -> int | None:
    """The sandbox's first process's host pid, once bubblewrap's ``--info-fd`` JSON is complete."""
    try:
        return int(json.loads(info)["child-pid"])
    except (ValueError, KeyError, TypeError):
        return None


def _read_child_pid(info_fd: int) -> int | None:
    info = b""
    with os.fdopen(info_fd, "rb", buffering=0) as handle:
        while (pid := child_pid(info)) is None and len(info) < 65536:
            chunk = handle.read(4096)
            if not chunk:
                return None
            info += chunk
    return pid


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{parent}/task/{task}/children") as handle:
                    children = [int(word) for word in handle.read().split()]
            except OSError:
                continue
            found += children
            todo += children
    return found


def _probe_uids(first: int, proc: subprocess.Popen[bytes]) -> set[int]:
    """The host uids of the probe's interpreter (found below ``first``), then let it end."""
    uids: set[int] = set()
    deadline = time.monotonic() + 15
    while not uids and proc.poll() is None and time.monotonic() < deadline:
        for pid in _descendants(first):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    argv0 = handle.read().split(b"\0")[0]
                with open(f"/proc/{pid}/status") as status:
                    lines = status.read().splitlines()
            except OSError:
                continue
            if b"python" in os.path.basename(argv0):
                uids |= {int(v) for line in lines if line.startswith("Uid:") for v in line.split()[1:]}
        time.sleep(0.005)
    if proc.stdin is not None:
        proc.stdin.close()
        proc.stdin = None  # communicate() must not flush it
    return uids


def require() -> None:
    """Raise :class:`IsolationUnavailable` with the reason and the fix when bubblewrap does not work."""
    reason = probe()
    if reason:
        raise IsolationUnavailable(
            f"code execution needs kernel isolation, which is unavailable: {reason}. To run untrusted "
            "code without it anyway (unsafe), set isolation='none-unsafe'."
        )
