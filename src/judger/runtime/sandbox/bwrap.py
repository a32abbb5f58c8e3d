"""The bubblewrap command line that confines one sample, and whether bubblewrap works here.

Each sample gets new user, PID, mount, IPC, UTS, network (no interface, not even loopback) and
cgroup namespaces; uid/gid 65534 without capabilities and with ``no_new_privs``; the system
(``/usr`` and the Python installation only: no ``/etc``, ``/home``, ``/root``, ``/run``) mounted
read-only; a private, size-capped tmpfs at ``/tmp`` as scratch and working directory; the rest of
the root read-only; ``--die-with-parent`` and ``--new-session``; the seccomp filter of
:mod:`judger.runtime.sandbox.seccomp`. Nothing of the host's environment is passed in.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys

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


def command(*, scratch_bytes: int, seccomp_fd: int | None) -> list[str]:
    """argv that runs the supervisor under bubblewrap (the job goes to its stdin)."""
    executable = shutil.which("bwrap") or "bwrap"
    # no nested user namespaces where this bubblewrap can say so (older ones: the seccomp filter
    # and the lack of capabilities still hold)
    nested = ["--disable-userns"] if "--disable-userns" in _options() else []
    args = [
        executable,
        "--unshare-user",
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_UID),
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-net",
        "--unshare-cgroup-try",
        *nested,
        "--die-with-parent",
        "--new-session",
        "--hostname",
        "sandbox",
        *_system_binds(),
        *_python_binds(),
        "--ro-bind",
        INSIDE_DIR,
        MOUNT_POINT,
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        str(scratch_bytes),
        "--tmpfs",
        SCRATCH,
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
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    return [*args, inside_path(sys.executable), "-I", f"{MOUNT_POINT}/supervisor.py"]


@functools.lru_cache(maxsize=1)
def probe() -> str:
    """ "" when bubblewrap confines programs here, else why not and what to do (cached)."""
    if shutil.which("bwrap") is None:
        return f"bubblewrap (bwrap) is not installed; {INSTALL_HINT}"
    if "--size" not in _options():
        return "this bubblewrap is too old to cap the scratch size (--size needs bubblewrap >= 0.7)"
    argv = command(scratch_bytes=1 << 20, seccomp_fd=None)
    argv[-2:] = ["-I", "-c", "import os; assert os.getuid() == 65534"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=30, env={"PATH": os.defpath})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap failed to start: {exc}; {INSTALL_HINT}"
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip()[-500:]
        reason = reason or f"exit {done.returncode}"
        return f"bubblewrap cannot create the sandbox here ({reason}); {INSTALL_HINT}"
    return ""


def require() -> None:
    """Raise :class:`IsolationUnavailable` with the reason and the fix when bubblewrap does not work."""
    reason = probe()
    if reason:
        raise IsolationUnavailable(
            f"code execution needs kernel isolation, which is unavailable: {reason}. To run untrusted "
            "code without it anyway (unsafe), set isolation='none-unsafe'."
        )
