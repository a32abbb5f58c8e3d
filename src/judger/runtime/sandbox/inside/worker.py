"""The only process that runs the program: started by the supervisor, once per test (``stdin``) or
once per sample (``call`` / ``assert``, then restarted after a test that kills it).

Started as ``python -I worker.py JOB_FD [REQUEST_FD RESPONSE_FD]``. It reads its job from
``JOB_FD``, sets hard resource limits, installs the audit hook (a second layer: the kernel
sandbox around it is the boundary) and only then compiles and runs the program. It never sees
expected outputs or test code: in ``call`` / ``assert`` mode it only answers calls, by name, with
plain values (:mod:`wire`). Whatever it writes, it can at most claim a return value or an
output, which the judge compares outside.
"""

import builtins
import errno
import json
import os
import resource
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# typing is not imported at run time (a worker starts per test); mypy treats the name as True
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from judger.runtime.sandbox.inside import wire
else:
    import wire  # run as a script: the sibling file, found through sys.path above

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_PATH_EVENTS = {
    "os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.truncate", "os.utime", "os.symlink",
    "os.link", "os.rename", "shutil.rmtree", "shutil.copyfile", "shutil.copymode", "shutil.copystat",
    "shutil.move",
}  # fmt: skip
_PROCESS_EVENTS = {
    "os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.exec", "os.system", "os.startfile",
    "subprocess.Popen", "pty.spawn",
}  # fmt: skip
_ALWAYS_BLOCKED = {
    "socket.__new__", "socket.bind", "socket.connect", "socket.getaddrinfo", "socket.sendto", "os.kill",
    "os.killpg", "signal.pthread_kill", "resource.setrlimit", "resource.prlimit", "ctypes.dlopen",
    "ctypes.dlsym", "ctypes.call_function", "ctypes.cdata", "os.chroot", "os.setns", "os.unshare",
}  # fmt: skip


def _limit(which: int, value: int) -> None:
    try:
        resource.setrlimit(which, (value, value))
    except (ValueError, OSError):
        hard = resource.getrlimit(which)[1]
        if hard == resource.RLIM_INFINITY or value <= hard:
            resource.setrlimit(which, (value, hard))


def _set_cpu(seconds: float) -> None:
    used = resource.getrusage(resource.RUSAGE_SELF)
    soft = max(1, int(used.ru_utime + used.ru_stime + seconds + 0.999))
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _install_guard(scratch: str, allow_subprocess: bool, isolated: bool) -> None:
    realpath, fspath = os.path.realpath, os.fspath
    prefix = scratch.rstrip(os.sep) + os.sep
    blocked = set(_ALWAYS_BLOCKED) | (set() if allow_subprocess else _PROCESS_EVENTS)
    if isolated:
        # inside the kernel sandbox native code gains nothing the program lacks, and NumPy needs ctypes
        blocked = {event for event in blocked if not event.startswith("ctypes.")}

    def inside(path: object) -> bool:
        if isinstance(path, int):
            return True
        try:
            resolved = realpath(fspath(path))  # type: ignore[call-overload]  # any object: TypeError below
        except (TypeError, ValueError):
            return False
        return resolved == scratch or resolved.startswith(prefix)

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = args
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS
            )
            if writing and not inside(path):
                raise PermissionError(
                    f"sandbox: writing outside the scratch directory is not allowed: {path!r}"
                )
            return
        if event in blocked:
            if event == "resource.setrlimit" and sys._getframe(1).f_code is _set_cpu.__code__:
                return
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event in _PATH_EVENTS:
            for path in args[:2]:
                if isinstance(path, (str, bytes, os.PathLike)) and not inside(path):
                    raise PermissionError(f"sandbox: {event} outside the scratch directory is not allowed")

    sys.addaudithook(hook)


def error_text(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        return "output size limit exceeded (RLIMIT_FSIZE)"  # Python ignores SIGXFSZ: writes fail instead
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 2000 else text[:2000] + "..."


def _confine(job: dict) -> None:
    limits = job["limits"]
    _limit(resource.RLIMIT_CORE, 0)
    _limit(resource.RLIMIT_AS, limits["memory_bytes"])
    _limit(resource.RLIMIT_FSIZE, limits["output_bytes"])
    _limit(resource.RLIMIT_NOFILE, limits["open_files"])
    if limits["processes"]:
        _limit(resource.RLIMIT_NPROC, limits["processes"])
    if limits.get("fork_filter"):
        _deny_new_processes(bytes.fromhex(limits["fork_filter"]))
    # the hard limit stays above every soft limit _set_cpu sets: the soft one sends SIGXCPU (read as
    # a CPU timeout), a hard one equal to it would send SIGKILL, read as a crash
    _limit(resource.RLIMIT_CPU, int(limits["cpu_total_s"]) + 2)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    _install_guard(os.path.realpath(os.getcwd()), limits["allow_subprocess"], job["isolated"])


def _deny_new_processes(program: bytes) -> None:
    """Install the host's seccomp filter that refuses fork/vfork/clone of a process (threads still
    start). Before the audit hook, which blocks ctypes; a failure stops the worker before any of the
    program's code runs, and the sample fails as the sandbox's fault (it never runs unconfined)."""
    import ctypes

    class _Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    code = ctypes.create_string_buffer(program, len(program))
    prog = _Prog(len(program) // 8, ctypes.cast(code, ctypes.c_void_p))
    # PR_SET_NO_NEW_PRIVS (bubblewrap sets it already; isolation="none-unsafe" does not), then
    # PR_SET_SECCOMP with SECCOMP_MODE_FILTER
    if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"sandbox: cannot install the process filter: {os.strerror(err)}")


_ERROR_FD = -1


def _run_stdin(job: dict) -> None:
    """fd 0 is the test input and fd 1 a file the supervisor reads; exit status 0 means it ran."""
    _set_cpu(job["limits"]["cpu_s"])
    try:
        code = compile(job["code"], "solution.py", "exec")
        exec(code, {"__name__": "__main__", "__builtins__": builtins})
    except SystemExit as exc:
        if exc.code not in (None, 0):
            _die(f"SystemExit: {exc.code}")
    except BaseException as exc:
        _die(error_text(exc))
    try:
        sys.stdout.flush()
    except BaseException as exc:
        _die(error_text(exc))
    os._exit(0)


def _die(text: str) -> None:
    """Report why the program failed on the supervisor's pipe (stderr may be full), then exit 1."""
    try:
        os.write(_ERROR_FD, wire.dumps({"event": "error", "error": text}))
    except OSError:
        pass
    finally:
        os._exit(1)


class _Wire:
    def __init__(self, response_fd: int, request_fd: int | None) -> None:
        self.requests = os.fdopen(request_fd, "rb", buffering=1 << 16) if request_fd is not None else None
        self.response_fd = response_fd

    def send(self, message: dict) -> None:
        data = memoryview(wire.dumps(message))
        while data:
            data = data[os.write(self.response_fd, data) :]


def _resolve(namespace: dict, name: str) -> "Callable[..., object]":
    fn = namespace.get(name)
    if fn is None and isinstance(namespace.get("Solution"), type):
        fn = getattr(namespace["Solution"](), name, None)
    if not callable(fn):
        raise NameError(f"the program defines no function {name!r}")
    return fn


def _serve(job: dict, channel: _Wire) -> None:
    """Load the program, then answer ``{"id", "name", "args", "kwargs"}`` requests until EOF."""
    namespace: dict = {"__name__": job["module"], "__builtins__": builtins}
    _set_cpu(job["limits"]["cpu_s"])
    try:
        exec(compile(job["code"], "solution.py", "exec"), namespace)
        if job.get("fn_name"):
            _resolve(namespace, job["fn_name"])
    except BaseException as exc:
        channel.send({"event": "load_error", "error": error_text(exc)})
        return
    callables, values = [], {}
    # only the names the tests read: values cost a copy across the pipe and are refused past a size
    wanted = None if job.get("wanted") is None else set(job["wanted"])
    for name, value in list(namespace.items()):
        if name.startswith("__") or (wanted is not None and name not in wanted):
            continue
        if callable(value) and not isinstance(value, type):
            callables.append(name)
            continue
        try:
            values[name] = wire.encode(value)
        except (wire.WireError, RecursionError):
            pass
    channel.send({"event": "loaded", "callables": callables, "values": values})
    assert channel.requests is not None
    for line in channel.requests:
        request = json.loads(line)
        reply: dict = {"id": request["id"]}
        _set_cpu(job["limits"]["cpu_s"])
        try:
            fn = _resolve(namespace, request["name"])
            result = fn(*wire.decode(request["args"]), **wire.decode(request["kwargs"]))
            reply.update(ok=True, value=wire.encode(result))
        except BaseException as exc:  # SystemExit included: the program may not leave mid-test
            reply.update(ok=False, type=type(exc).__name__, error=error_text(exc))
        channel.send(reply)


def run(job_fd: int, response_fd: int, request_fd: int | None) -> None:
    """Read the job, confine this process, then run the program (never returns)."""
    with os.fdopen(job_fd, "rb") as handle:
        job = json.loads(handle.read())
    sys.argv = ["solution.py"]
    channel = _Wire(response_fd, request_fd)
    try:
        _confine(job)
    except BaseException as exc:
        # the sandbox's fault, not the program's: said apart, so that the sample is a judge
        # failure instead of a crash scored 0
        channel.send({"event": "unconfined", "error": error_text(exc)})
        os._exit(1)
    channel.send({"event": "ready"})  # the supervisor's wall clock for the program starts here
    if channel.requests is None:
        global _ERROR_FD
        _ERROR_FD = channel.response_fd
        _run_stdin(job)
    else:
        _serve(job, channel)
    os._exit(0)


def main() -> None:
    """``worker.py JOB_FD RESPONSE_FD [REQUEST_FD]``: one stdin run, or serve calls on the pipes."""
    run(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else None)


if __name__ == "__main__":
    main()
