"""The sandboxed side of :mod:`judger.runtime.sandbox.runner`: run as ``python -I child.py``.

It reads one JSON job from stdin, confines itself, then runs untrusted code against each test and
reports one JSON line per test on the stdout it had at start (user code writes to other places).

Confinement, in order: resource limits (address space, per-test CPU seconds, file size, no core
files); its own network namespace when the kernel allows it (``unshare(CLONE_NEWNET)``: there is
no interface up, not even loopback); then a CPython audit hook that refuses socket creation, any
new process (fork, exec, spawn, subprocess, system), signals to other processes, raising resource
limits, loading native code through ctypes, and any write, rename, removal or permission change
outside the scratch directory. The audit hook is a Python-level guard, not a kernel boundary; the
namespace, the limits and the parent killing the whole process group are the hard bounds.

This file imports only the standard library and never imports judger: it runs in a bare
interpreter, must start fast, and must not give untrusted code anything more to touch.
"""

import builtins
import errno
import json
import math
import os
import resource
import secrets
import sys
import traceback

_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_PATH_EVENTS = {
    "os.remove",
    "os.rmdir",
    "os.mkdir",
    "os.chmod",
    "os.chown",
    "os.truncate",
    "os.utime",
    "os.symlink",
    "os.link",
    "os.rename",
    "shutil.rmtree",
    "shutil.copyfile",
    "shutil.copymode",
    "shutil.copystat",
    "shutil.move",
}
_PROCESS_EVENTS = {
    "os.fork",
    "os.forkpty",
    "os.posix_spawn",
    "os.spawn",
    "os.exec",
    "os.system",
    "os.startfile",
    "subprocess.Popen",
    "pty.spawn",
}
_ALWAYS_BLOCKED = {
    "socket.__new__",
    "socket.bind",
    "socket.connect",
    "socket.getaddrinfo",
    "socket.sendto",
    "os.kill",
    "os.killpg",
    "signal.pthread_kill",
    "resource.setrlimit",
    "resource.prlimit",
    "ctypes.dlopen",
    "ctypes.dlsym",
    "ctypes.call_function",
    "ctypes.cdata",
    "os.chroot",
    "os.setns",
    "os.unshare",
}


class _Channel:
    """The line-oriented result pipe to the parent, on a private duplicate of the original stdout.

    Every message carries the run's token, and the descriptor sits at a random high number, so a
    program cannot forge results by writing to a guessed descriptor (it would have to dig the token
    out of this process's memory; the parent computes stdin and call verdicts itself anyway).
    """

    def __init__(self, fd: int, token: str) -> None:
        target = 200 + secrets.randbelow(800)
        os.dup2(fd, target, inheritable=False)
        os.close(fd)
        self.fd = target
        self.token = token

    def send(self, message: dict) -> None:
        message["token"] = self.token
        data = (json.dumps(message, default=repr) + "\n").encode()
        view = memoryview(data)
        while view:
            written = os.write(self.fd, view)
            view = view[written:]


def _limit(which: int, value: int) -> None:
    try:
        resource.setrlimit(which, (value, value))
    except (ValueError, OSError):
        hard = resource.getrlimit(which)[1]
        if hard == resource.RLIM_INFINITY or value <= hard:
            resource.setrlimit(which, (value, hard))


def _isolate_network() -> str:
    """Enter a fresh network namespace if the kernel lets us; say which layer blocks the network."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(_CLONE_NEWNET) == 0:
            return "netns+audit"
        # unprivileged: a user namespace first makes the network namespace allowed
        if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) == 0:
            return "userns+netns+audit"
    except Exception:
        pass
    return "audit"


def _install_guard(scratch: str, allow_subprocess: bool) -> None:
    realpath = os.path.realpath
    fspath = os.fspath
    prefix = scratch.rstrip(os.sep) + os.sep
    blocked = set(_ALWAYS_BLOCKED)
    if not allow_subprocess:
        blocked |= _PROCESS_EVENTS

    def inside(path: object) -> bool:
        if isinstance(path, int):  # an already open descriptor
            return True
        try:
            resolved = realpath(fspath(path))  # type: ignore[arg-type]
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
            # the runner's own per-test CPU budget (bounded by the hard limit set before the hook)
            if event == "resource.setrlimit" and sys._getframe(1).f_code is _set_cpu.__code__:
                return
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event in _PATH_EVENTS:
            for path in args[:2]:
                if isinstance(path, (str, bytes, os.PathLike)) and not inside(path):
                    raise PermissionError(f"sandbox: {event} outside the scratch directory is not allowed")

    sys.addaudithook(hook)


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        return "output size limit exceeded (RLIMIT_FSIZE)"  # Python ignores SIGXFSZ: writes fail instead
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 2000 else text[:2000] + "..."


def _set_cpu(seconds: float) -> None:
    used = resource.getrusage(resource.RUSAGE_SELF)
    now = used.ru_utime + used.ru_stime
    soft = max(1, math.ceil(now + seconds))
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _redirect(fd: int, path: str, flags: int) -> None:
    new = os.open(path, flags, 0o600)
    if new != fd:  # the program may have closed ``fd`` (``open(0)`` closes it), so ``new`` can be it
        os.dup2(new, fd)
        os.close(new)


def _run_stdin(job: dict, code: object, out: _Channel) -> None:
    """Each test: the program runs as ``__main__`` with the input on fd 0 and fd 1 in a file."""
    for index, text in job["tests"]:
        in_path, out_path = f"in_{index}.txt", f"out_{index}.txt"
        with open(in_path, "w", encoding="utf-8") as handle:
            handle.write(text)
        _redirect(0, in_path, os.O_RDONLY)
        _redirect(1, out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        stdout = sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        status, error = "ok", ""
        _set_cpu(job["cpu_s"])
        try:
            exec(code, {"__name__": "__main__", "__builtins__": builtins})
        except SystemExit as exc:
            if exc.code not in (None, 0):
                status, error = "error", f"SystemExit: {exc.code}"
        except BaseException as exc:
            status, error = "error", _error_text(exc)
        try:
            stdout.flush()
        except Exception:
            pass
        os.dup2(job["_null"], 1)
        with open(out_path, "rb") as handle:
            produced = handle.read().decode("utf-8", errors="replace")
        out.send({"event": "test", "index": index, "status": status, "stdout": produced, "error": error})


def _load(code: object, name: str) -> dict:
    namespace: dict = {"__name__": name, "__builtins__": builtins}
    exec(code, namespace)
    return namespace


def _run_call(job: dict, code: object, out: _Channel) -> None:
    """Load the program once, then call ``fn_name`` (or ``Solution().fn_name``) with each input."""
    namespace = _load(code, "solution")
    fn_name = job["fn_name"]
    fn = namespace.get(fn_name)
    if fn is None and isinstance(namespace.get("Solution"), type):
        fn = getattr(namespace["Solution"](), fn_name, None)
    if not callable(fn):
        raise NameError(f"the program defines no function {fn_name!r}")
    out.send({"event": "loaded"})
    for index, args in job["tests"]:
        _set_cpu(job["cpu_s"])
        try:
            result = fn(*args)
        except SystemExit as exc:
            out.send({"event": "test", "index": index, "status": "error", "error": f"SystemExit: {exc.code}"})
            continue
        except BaseException as exc:
            out.send({"event": "test", "index": index, "status": "error", "error": _error_text(exc)})
            continue
        try:
            encoded = json.loads(json.dumps(result))
        except (TypeError, ValueError, RecursionError):
            out.send(
                {
                    "event": "test",
                    "index": index,
                    "status": "error",
                    "error": f"unserialisable {result!r:.200}",
                }
            )
            continue
        out.send({"event": "test", "index": index, "status": "ok", "output": encoded})


def _run_assert(job: dict, code: object, out: _Channel) -> None:
    """Load the program once, then run each test snippet in its namespace (HumanEval's ``check``)."""
    namespace = _load(code, "__main__")
    out.send({"event": "loaded"})
    entry_point = job.get("entry_point")
    for index, snippet in job["tests"]:
        _set_cpu(job["cpu_s"])
        try:
            exec(compile(snippet, f"<test {index}>", "exec"), namespace)
            if entry_point:
                namespace["check"](namespace[entry_point])
        except BaseException as exc:
            out.send({"event": "test", "index": index, "status": "error", "error": _error_text(exc)})
            continue
        out.send({"event": "test", "index": index, "status": "ok"})


def main() -> None:
    job = json.loads(sys.stdin.buffer.read())
    out = _Channel(os.dup(1), job.pop("token", ""))
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.dup2(null, 2)
    job["_null"] = null
    sys.setrecursionlimit(max(sys.getrecursionlimit(), job.get("recursion_limit", 10_000)))

    _limit(resource.RLIMIT_CORE, 0)
    _limit(resource.RLIMIT_AS, job["memory_bytes"])
    _limit(resource.RLIMIT_FSIZE, job["output_bytes"])
    cpu_total = math.ceil(job["cpu_s"] * max(1, len(job["tests"])) + 2)
    _limit(resource.RLIMIT_CPU, cpu_total)
    network = _isolate_network()
    scratch = os.path.realpath(os.getcwd())
    _install_guard(scratch, job.get("allow_subprocess", False))
    out.send({"event": "ready", "network": network})

    try:
        code = compile(job["code"], "solution.py", "exec")
        runner = {"stdin": _run_stdin, "call": _run_call, "assert": _run_assert}[job["mode"]]
        runner(job, code, out)
    except BaseException as exc:
        out.send(
            {"event": "load_error", "error": _error_text(exc), "traceback": traceback.format_exc(limit=-3)}
        )
    out.send({"event": "done"})


if __name__ == "__main__":
    main()
