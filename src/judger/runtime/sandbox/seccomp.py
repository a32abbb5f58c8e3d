"""A seccomp filter (classic BPF) that bubblewrap installs in the sandbox (``--seccomp FD``).

Namespaces and rlimits leave a few ways to hold memory that no limit counts: ``memfd_create``
(shared memory outside the address-space limit), System V shared memory and message queues (they
outlive the process that made them), and ``memfd_secret``. The filter makes those calls fail with
EPERM, and ``ptrace`` / ``process_vm_*`` / ``pidfd_getfd`` as a second layer to the supervisor being
non-dumpable. Every other call is allowed: the namespaces are the boundary, not this list.

:func:`fork_filter` is a second filter, which the worker installs on itself just before the program
runs (unless subprocesses are allowed): no new processes, threads still allowed. RLIMIT_NPROC
cannot do this job when the judge runs as root: the sandbox's uid maps to root outside its user
namespace, and the kernel never applies RLIMIT_NPROC to root, so a fork bomb reached 6,500
processes on a 2-core machine under ``processes=64`` and starved the samples beside it.
"""

from __future__ import annotations

import errno
import platform
import struct

_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_X32_BIT = 0x40000000

# (audit arch, {name: number}) per machine
_TABLES: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (
        0xC000003E,
        {
            "memfd_create": 319,
            "memfd_secret": 447,
            "shmget": 29,
            "msgget": 68,
            "ptrace": 101,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "pidfd_getfd": 438,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "memfd_create": 279,
            "memfd_secret": 447,
            "shmget": 194,
            "msgget": 186,
            "ptrace": 117,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "pidfd_getfd": 438,
        },
    ),
}
DENIED = tuple(_TABLES["x86_64"][1])

# the calls that start a process: clone without CLONE_THREAD, fork, vfork; clone3 takes its flags in
# a struct a filter cannot read, so it answers ENOSYS and the C library falls back to clone
_PROCESS_CALLS: dict[str, dict[str, int]] = {
    "x86_64": {"clone": 56, "fork": 57, "vfork": 58, "clone3": 435},
    "aarch64": {"clone": 220, "clone3": 435},
}
_CLONE_THREAD = 0x00010000
_ARG0_LOW = 16  # offsetof(struct seccomp_data, args[0]), its low 32 bits on little-endian machines


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def filter_program(machine: str | None = None) -> bytes | None:
    """The filter for this machine, or None where we have no syscall table for it."""
    table = _TABLES.get(machine or platform.machine())
    if table is None:
        return None
    arch, numbers = table
    denied = sorted(numbers.values())
    deny = _op(_RET_K, _ERRNO | errno.EPERM)
    allow = _op(_RET_K, _ALLOW)
    body = [
        _op(_LD_W_ABS, 4),  # seccomp_data.arch
        _op(_JEQ_K, arch, jt=1, jf=0),
        _op(_RET_K, _ERRNO | errno.ENOSYS),  # another ABI than the one the numbers are for
        _op(_LD_W_ABS, 0),  # seccomp_data.nr
    ]
    if arch == 0xC000003E:
        body.append(_op(_JGE_K, _X32_BIT, jt=len(denied) + 1, jf=0))  # x32 calls: jump to deny
    for i, nr in enumerate(denied):
        body.append(_op(_JEQ_K, nr, jt=len(denied) - i, jf=0))  # to the deny below the allow
    body += [allow, deny]
    return b"".join(body)


def fork_filter(machine: str | None = None) -> bytes | None:
    """A filter that refuses new processes (EPERM) but lets threads start; None where we have no
    syscall table for this machine (then only RLIMIT_NPROC bounds processes)."""
    machine = machine or platform.machine()
    calls = _PROCESS_CALLS.get(machine)
    if calls is None:
        return None
    arch = _TABLES[machine][0]
    # (opcode, k, jump-if-true label, jump-if-false label): labels resolved below, so no offset is
    # counted by hand
    code: list[tuple[int, int, str | None, str | None]] = [
        (_LD_W_ABS, 4, None, None),  # seccomp_data.arch
        (_JEQ_K, arch, None, "enosys"),
        (_LD_W_ABS, 0, None, None),  # seccomp_data.nr
    ]
    if arch == 0xC000003E:
        code.append((_JGE_K, _X32_BIT, "deny", None))
    code += [(_JEQ_K, calls[name], "deny", None) for name in ("fork", "vfork") if name in calls]
    code += [
        (_JEQ_K, calls["clone3"], "enosys", None),
        (_JEQ_K, calls["clone"], None, "allow"),
        (_LD_W_ABS, _ARG0_LOW, None, None),
        (_JSET_K, _CLONE_THREAD, "allow", "deny"),
    ]
    returns = {"allow": _ALLOW, "deny": _ERRNO | errno.EPERM, "enosys": _ERRNO | errno.ENOSYS}
    at = {label: len(code) + i for i, label in enumerate(returns)}
    body = []
    for i, (op, k, yes, no) in enumerate(code):
        jt = at[yes] - i - 1 if yes else 0
        jf = at[no] - i - 1 if no else 0
        body.append(_op(op, k, jt=jt, jf=jf))
    body += [_op(_RET_K, value) for value in returns.values()]
    return b"".join(body)
