"""The seccomp filters (classic BPF) around a judged program.

:func:`filter_program` is installed by bubblewrap on the whole sandbox (``--seccomp FD``). It
refuses (EPERM) what a container runtime's default profile refuses (Docker's / moby's: kernel
keyrings, ``mount`` and namespaces, ``ptrace`` and ``process_vm_*``, ``bpf``, ``perf_event_open``,
``userfaultfd``, module and clock calls, ``kcmp``, handles by inode, NUMA policy) and, beyond it:

- ``memfd_create``/``memfd_secret`` and System V shared memory and message queues: memory that
  no rlimit counts, or that outlives the program;
- the chmod and chown families: whatever the program's uid owns outside its scratch is still not
  its to change (``/dev`` nodes are the host's own, bind-mounted);
- ``fcntl(F_SETLEASE)``, inotify and fanotify: leases stall every open of a file on the host, and
  watch instances are a per-user kernel quota shared with other processes;
- ``io_uring_setup``: locked memory charged per user, and a second syscall surface;
- ``pidfd_getfd``, ``prlimit64`` on another process, ``clone`` with namespace flags;
- what the kernel counts per machine rather than per cgroup: sockets (and socket pairs) of any
  family but ``AF_UNIX`` (TCP and UDP buffers are machine-wide counters, which cgroup v1 does not
  charge; the sandbox has no network anyway; and a family's first socket can load its kernel
  module), ``io_setup``/``io_submit`` (``fs.aio-max-nr`` is one quota for
  the machine) and ``mmap(MAP_HUGETLB)`` (the reserved huge page pool, which no memory limit counts);
- a thread (``clone(CLONE_THREAD)``) that does not share its creator's descriptor table, memory,
  filesystem, signal handlers and semaphore undo list (``pthread_create`` shares all five): each
  such thread would hold ``RLIMIT_NOFILE`` descriptors of its own.

``clone3`` answers ENOSYS (its flags sit in a struct a filter cannot read; the C library then falls
back to ``clone``, whose flags it can). Calls of another ABI (x32, or a 32-bit ABI on a 64-bit
kernel) answer ENOSYS. Every other call is allowed: the namespaces and the unprivileged uid are the
boundary, not this list.

:func:`fork_filter` is a second filter, which the worker installs on itself just before the program
runs (unless subprocesses are allowed): no new processes, threads still allowed.
"""

from __future__ import annotations

import errno
import platform
import struct

_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_AND_K = 0x54
_RET_K = 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_X32_BIT = 0x40000000
_X86_64 = 0xC000003E
_AARCH64 = 0xC00000B7

# the names refused outright; a name missing from a machine's table does not exist there
REFUSED: tuple[str, ...] = (
    # what a container runtime's default profile refuses
    "acct", "add_key", "bpf", "clock_adjtime", "clock_settime", "create_module", "delete_module",
    "finit_module", "get_kernel_syms", "get_mempolicy", "init_module", "ioperm", "iopl", "kcmp",
    "kexec_file_load", "kexec_load", "keyctl", "lookup_dcookie", "mbind", "migrate_pages", "mount",
    "move_mount", "move_pages", "name_to_handle_at", "nfsservctl", "open_by_handle_at", "open_tree",
    "fsopen", "fsconfig", "fsmount", "fspick", "perf_event_open", "pivot_root", "process_vm_readv",
    "process_vm_writev", "ptrace", "query_module", "quotactl", "reboot", "request_key",
    "set_mempolicy", "setns", "settimeofday", "swapoff", "swapon", "sysfs", "syslog", "umount2",
    "unshare", "uselib", "userfaultfd", "ustat", "vhangup",
    # beyond it: memory no limit counts, the host's files and quotas, another process's handles
    "memfd_create", "memfd_secret", "shmget", "msgget", "chmod", "fchmod", "fchmodat", "fchmodat2",
    "chown", "fchown", "lchown", "fchownat", "inotify_init", "inotify_init1", "fanotify_init",
    "io_uring_setup", "pidfd_getfd",
    # one quota for the whole machine
    "io_setup", "io_submit",
)  # fmt: skip

_NUMBERS: dict[str, dict[str, int]] = {
    "x86_64": {
        "acct": 163, "add_key": 248, "bpf": 321, "clock_adjtime": 305, "clock_settime": 227,
        "create_module": 174, "delete_module": 176, "finit_module": 313, "get_kernel_syms": 177,
        "get_mempolicy": 239, "init_module": 175, "ioperm": 173, "iopl": 172, "kcmp": 312,
        "kexec_file_load": 320, "kexec_load": 246, "keyctl": 250, "lookup_dcookie": 212, "mbind": 237,
        "migrate_pages": 256, "mount": 165, "move_mount": 429, "move_pages": 279,
        "name_to_handle_at": 303, "nfsservctl": 180, "open_by_handle_at": 304, "open_tree": 428,
        "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "perf_event_open": 298,
        "pivot_root": 155, "process_vm_readv": 310, "process_vm_writev": 311, "ptrace": 101,
        "query_module": 178, "quotactl": 179, "reboot": 169, "request_key": 249, "set_mempolicy": 238,
        "setns": 308, "settimeofday": 164, "swapoff": 168, "swapon": 167, "sysfs": 139, "syslog": 103,
        "umount2": 166, "unshare": 272, "uselib": 134, "userfaultfd": 323, "ustat": 136, "vhangup": 153,
        "memfd_create": 319, "memfd_secret": 447, "shmget": 29, "msgget": 68, "chmod": 90, "fchmod": 91,
        "fchmodat": 268, "fchmodat2": 452, "chown": 92, "fchown": 93, "lchown": 94, "fchownat": 260,
        "inotify_init": 253, "inotify_init1": 294, "fanotify_init": 300, "io_uring_setup": 425,
        "pidfd_getfd": 438, "io_setup": 206, "io_submit": 209,
        # the calls with rules on their arguments, below
        "clone": 56, "fork": 57, "vfork": 58, "clone3": 435, "fcntl": 72, "prlimit64": 302, "socket": 41,
        "socketpair": 53, "mmap": 9,
    },
    "aarch64": {
        "acct": 89, "add_key": 217, "bpf": 280, "clock_adjtime": 266, "clock_settime": 112,
        "delete_module": 106, "finit_module": 273, "get_mempolicy": 236, "init_module": 105,
        "kcmp": 272, "kexec_file_load": 294, "kexec_load": 104, "keyctl": 219, "lookup_dcookie": 18,
        "mbind": 235, "migrate_pages": 238, "mount": 40, "move_mount": 429, "move_pages": 239,
        "name_to_handle_at": 264, "nfsservctl": 42, "open_by_handle_at": 265, "open_tree": 428,
        "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "perf_event_open": 241,
        "pivot_root": 41, "process_vm_readv": 270, "process_vm_writev": 271, "ptrace": 117,
        "quotactl": 60, "reboot": 142, "request_key": 218, "set_mempolicy": 237, "setns": 268,
        "settimeofday": 170, "swapoff": 225, "swapon": 224, "syslog": 116, "umount2": 39,
        "unshare": 97, "userfaultfd": 282, "vhangup": 58, "memfd_create": 279, "memfd_secret": 447,
        "shmget": 194, "msgget": 186, "fchmod": 52, "fchmodat": 53, "fchmodat2": 452, "fchown": 55,
        "fchownat": 54, "inotify_init1": 26, "fanotify_init": 262, "io_uring_setup": 425,
        "pidfd_getfd": 438, "io_setup": 0, "io_submit": 2,
        "clone": 220, "clone3": 435, "fcntl": 25, "prlimit64": 261, "socket": 198,
        "socketpair": 199, "mmap": 222,
    },
}  # fmt: skip
_ARCH = {"x86_64": _X86_64, "aarch64": _AARCH64}

_CLONE_THREAD = 0x00010000
# CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM: what glibc's, musl's
# and Go's threads share; a thread without CLONE_FILES would have a descriptor table of its own
_THREAD_SHARES = 0x00000100 | 0x00000200 | 0x00000400 | 0x00000800 | _CLONE_THREAD | 0x00040000
_AF_UNIX = 1
_MAP_HUGETLB = 0x40000
# CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET
_CLONE_NAMESPACES = 0x7E020000
_F_SETLEASE = 1024
_ARG0_LOW = 16  # offsetof(struct seccomp_data, args[0]), its low 32 bits on little-endian machines
_ARG1_LOW = 24
_ARG3_LOW = 40

Step = tuple[int, int, "str | None", "str | None"]
"""(opcode, k, label if true, label if false): jumps are resolved from labels by :func:`_assemble`."""


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


_RETURNS = {"allow": _ALLOW, "deny": _ERRNO | errno.EPERM, "enosys": _ERRNO | errno.ENOSYS}


def _assemble(blocks: list[tuple[str | None, list[Step]]]) -> bytes:
    """Lay out labelled blocks followed by the three returns; a label names a block or a return."""
    at: dict[str, int] = {}
    position = 0
    for label, steps in blocks:
        if label is not None:
            at[label] = position
        position += len(steps)
    for i, label in enumerate(_RETURNS):
        at[label] = position + i
    body, i = [], 0
    for _, steps in blocks:
        for op, k, yes, no in steps:
            jt = at[yes] - i - 1 if yes else 0
            jf = at[no] - i - 1 if no else 0
            if not (0 <= jt < 256 and 0 <= jf < 256):
                raise ValueError("seccomp filter jump out of range")
            body.append(_op(op, k, jt=jt, jf=jf))
            i += 1
    body += [_op(_RET_K, value) for value in _RETURNS.values()]
    return b"".join(body)


def _prologue(machine: str) -> list[Step]:
    arch = _ARCH[machine]
    steps: list[Step] = [
        (_LD_W_ABS, 4, None, None),  # seccomp_data.arch
        (_JEQ_K, arch, None, "enosys"),  # another ABI than the one the numbers are for
        (_LD_W_ABS, 0, None, None),  # seccomp_data.nr
    ]
    if arch == _X86_64:
        steps.append((_JGE_K, _X32_BIT, "enosys", None))
    return steps


def filter_program(machine: str | None = None) -> bytes | None:
    """The sandbox-wide filter for this machine, or None where we have no syscall table for it."""
    machine = machine or platform.machine()
    numbers = _NUMBERS.get(machine)
    if numbers is None:
        return None
    denied = sorted({numbers[name] for name in REFUSED if name in numbers})
    head = _prologue(machine)
    head += [(_JEQ_K, nr, "deny", None) for nr in denied]
    head += [
        (_JEQ_K, numbers["clone3"], "enosys", None),
        (_JEQ_K, numbers["clone"], "clone", None),
        (_JEQ_K, numbers["fcntl"], "fcntl", None),
        (_JEQ_K, numbers["prlimit64"], "prlimit", None),
        (_JEQ_K, numbers["socket"], "socket", None),
        (_JEQ_K, numbers["socketpair"], "socket", None),
        (_JEQ_K, numbers["mmap"], "mmap", "allow"),
    ]
    return _assemble(
        [
            (None, head),
            (
                "clone",
                [
                    (_LD_W_ABS, _ARG0_LOW, None, None),
                    (_JSET_K, _CLONE_NAMESPACES, "deny", None),
                    (_JSET_K, _CLONE_THREAD, None, "allow"),
                    (_AND_K, _THREAD_SHARES, None, None),
                    (_JEQ_K, _THREAD_SHARES, "allow", "deny"),
                ],
            ),
            ("fcntl", [(_LD_W_ABS, _ARG1_LOW, None, None), (_JEQ_K, _F_SETLEASE, "deny", "allow")]),
            # another process's limits (pid != 0): the supervisor shares the program's uid
            ("prlimit", [(_LD_W_ABS, _ARG0_LOW, None, None), (_JEQ_K, 0, "allow", "deny")]),
            ("socket", [(_LD_W_ABS, _ARG0_LOW, None, None), (_JEQ_K, _AF_UNIX, "allow", "deny")]),
            ("mmap", [(_LD_W_ABS, _ARG3_LOW, None, None), (_JSET_K, _MAP_HUGETLB, "deny", "allow")]),
        ]
    )


def fork_filter(machine: str | None = None) -> bytes | None:
    """A filter that refuses new processes (EPERM) but lets threads start; None where we have no
    syscall table for this machine (then only RLIMIT_NPROC bounds processes)."""
    machine = machine or platform.machine()
    numbers = _NUMBERS.get(machine)
    if numbers is None:
        return None
    steps = _prologue(machine)
    steps += [(_JEQ_K, numbers[name], "deny", None) for name in ("fork", "vfork") if name in numbers]
    steps += [
        (_JEQ_K, numbers["clone3"], "enosys", None),
        (_JEQ_K, numbers["clone"], None, "allow"),
        (_LD_W_ABS, _ARG0_LOW, None, None),
        (_JSET_K, _CLONE_THREAD, "allow", "deny"),
    ]
    return _assemble([(None, steps)])
