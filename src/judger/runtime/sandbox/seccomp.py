"""A seccomp filter (classic BPF) that bubblewrap installs in the sandbox (``--seccomp FD``).

Namespaces and rlimits leave a few ways to hold memory that no limit counts: ``memfd_create``
(shared memory outside the address-space limit), System V shared memory and message queues (they
outlive the process that made them), and ``memfd_secret``. The filter makes those calls fail with
EPERM, and ``ptrace`` / ``process_vm_*`` / ``pidfd_getfd`` as a second layer to the supervisor being
non-dumpable. Every other call is allowed: the namespaces are the boundary, not this list.
"""

from __future__ import annotations

import errno
import platform
import struct

_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
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
