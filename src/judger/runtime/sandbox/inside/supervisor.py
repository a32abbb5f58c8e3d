"""The trusted side inside the sandbox: runs the tests, never the program.

Started by the host as ``python -I supervisor.py`` (under bubblewrap, or directly in the weaker
``isolation="none-unsafe"`` mode). It reads one JSON job on stdin, makes itself non-dumpable (so
the program, running under the same uid, can neither read its memory nor open its descriptors
through ``/proc``), and starts :mod:`worker` processes that hold the program (the first one is
forked from this process before the job is read, see :class:`Zygote`; later ones are exec'd):

- ``stdin``: a fresh worker per test, fd 0 the input, fd 1 an unlinked file in scratch; the bytes
  are sent to the host, which compares them with the expected output (never sent here).
- ``call``: one worker per sample; each test is a call by name with plain arguments, the plain
  return value goes to the host for comparison.
- ``assert``: the test code runs *here*, in this process, with the program's top-level functions
  that it reads as globals (never a builtin's name) replaced by proxies that call into the worker
  and get back a plain value (:mod:`wire`). So the program cannot patch ``exec``, ``check``,
  ``AssertionError``, ``__eq__`` or a builtin, see the tests, steer them with ``StopIteration``, or
  reach the channel to the host: a test passes only if this process ran it to the end.

Results go to the host on fd 1 as one JSON line per event, a ``stdout_len``-byte payload after it.
A worker that overruns the per-test wall time is killed with everything it started (in the
sandbox's PID namespace: every process but pid 1 and this one) and the next test gets a new one.
"""

import builtins
import contextlib
import ctypes
import json
import os
import resource
import select
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# typing is not imported at run time (this process starts per sample); mypy treats the name as True
TYPE_CHECKING = False
if TYPE_CHECKING:
    import types

    from judger.runtime.sandbox.inside import wire
else:
    import wire  # run as a script: the sibling file, found through sys.path above

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
_PR_SET_DUMPABLE = 4
_LINE_SLACK = 1 << 16


class Stop(BaseException):
    """The worker is gone or late: ends the test with ``status`` (not catchable by test code)."""

    def __init__(self, status: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class ProgramRaised(Exception):
    """A proxied call's error when the program raised an exception that steers control flow
    (``StopIteration``, ``GeneratorExit``, ``SystemExit``, ``KeyboardInterrupt`` and their kin):
    an ordinary error to the test, which then fails."""


_CONTROL_FLOW = (StopIteration, StopAsyncIteration, GeneratorExit, SystemExit, KeyboardInterrupt)


def emit(message: dict, payload: bytes = b"") -> None:
    data = memoryview(wire.dumps(message) + payload)
    while data:
        data = data[os.write(1, data) :]


def crash_detail(returncode: int | None) -> tuple[str, str]:
    if returncode is None or returncode >= 0:
        return "crashed", f"the program ended the interpreter (exit code {returncode})"
    sig = -returncode
    if sig == signal.SIGXCPU:
        return "timeout", "CPU time limit exceeded"
    if sig == signal.SIGXFSZ:
        return "error", "output size limit exceeded"
    try:
        name = signal.Signals(sig).name
    except ValueError:
        name = str(sig)
    return "crashed", f"killed by {name}"


_WORKER_ENV = {"PATH": "/usr/bin:/bin", "PYTHONIOENCODING": "utf-8", "LANG": "C.UTF-8"}
_WORKER_ENV.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")


class Forked:
    """The ``subprocess.Popen`` surface the supervisor uses, for a worker made with ``os.fork``."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                pid, status = self.pid, 0
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired([str(self.pid)], timeout or 0)
            time.sleep(0.002)
        return self.returncode


class Zygote:
    """The first worker, forked before the job is read (so it never held the tests or the job).

    It saves one interpreter start per sample. Its pipes and three scratch files (stdin, stdout
    and stderr for a stdin-mode test) exist before the fork; the supervisor fills the input file
    and sends the worker part of the job when the first test starts.
    """

    def __init__(self, scratch: str) -> None:
        self.files = [_tmpfile(scratch) for _ in range(3)]
        self.job_r, self.job_w = os.pipe()
        self.resp_r, self.resp_w = os.pipe()
        self.req_r, self.req_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child never returns
            self._become_worker(scratch)
        self.proc = Forked(pid)
        for fd in (self.job_r, self.resp_w, self.req_r):
            os.close(fd)

    def _become_worker(self, scratch: str) -> None:
        try:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)  # first of all: the host's channel is fd 0 / 1 here
            os.setpgrp()
            for fd in (self.job_w, self.resp_r, self.req_w):
                os.close(fd)
            os.environ.clear()
            os.environ.update(_WORKER_ENV, HOME=scratch, TMPDIR=scratch)
            header = b""
            while not header.endswith(b"\n"):
                chunk = os.read(self.job_r, 1)
                if not chunk:
                    os._exit(0)
                header += chunk
            stdin_mode = header == b"stdin\n"
            for fd, source in zip((0, 1, 2), self.files if stdin_mode else (null, null, null)):
                os.dup2(source, fd)
            for fd in (*self.files, null, *((self.req_r,) if stdin_mode else ())):
                os.close(fd)
            if TYPE_CHECKING:
                from judger.runtime.sandbox.inside import worker
            else:
                import worker  # the sibling file, imported only in the forked child

            worker.run(self.job_r, self.resp_w, None if stdin_mode else self.req_r)
        finally:
            os._exit(1)

    def release(self, serve: bool) -> None:
        os.write(self.job_w, b"serve\n" if serve else b"stdin\n")
        for fd in self.files:
            os.close(fd)


def _tmpfile(scratch: str) -> int:
    try:
        return os.open(scratch, os.O_TMPFILE | os.O_RDWR, 0o600)
    except OSError:
        import tempfile

        fd, path = tempfile.mkstemp(dir=scratch)
        os.unlink(path)
        return fd


class Supervisor:
    def __init__(self, job: dict, zygote: Zygote | None = None) -> None:
        self.job = job
        self.limits = job["limits"]
        self.isolated = job["isolated"]
        self.scratch = os.getcwd()
        self.zygote = zygote
        self.compiled: dict = {}

    # --- processes --------------------------------------------------------------------------

    def reap(self, proc: "subprocess.Popen[bytes] | Forked") -> int | None:
        """Kill the worker and everything it started; return its exit status."""
        if self.isolated:
            # our own PID namespace, where we are pid 1: every other process is the program's
            me = os.getpid()
            victims = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me]
            for pid in victims:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        else:
            # no PID namespace: the worker's process group; what left it dies with our session at the end
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        try:
            returncode = proc.wait(10)
        except subprocess.TimeoutExpired:
            return proc.returncode
        if self.isolated:
            _reap_orphans()  # as pid 1, the program's orphans are ours to wait for
        return returncode

    def worker_job(self, cpu_total_s: float) -> bytes:
        return json.dumps(
            {
                "code": self.job["code"],
                "module": "solution" if self.job["mode"] == "call" else "__main__",
                "fn_name": self.job.get("fn_name") if self.job["mode"] == "call" else None,
                "wanted": self.wanted_names(),
                "limits": {**self.limits, "cpu_total_s": cpu_total_s},
                "isolated": self.isolated,
            }
        ).encode()

    def from_zygote(self, serve: bool, cpu_total_s: float) -> "Worker":
        """The forked first worker; its stdio are the zygote's files (already filled by the caller)."""
        zygote, self.zygote = self.zygote, None
        assert zygote is not None
        zygote.release(serve)
        try:
            with os.fdopen(zygote.job_w, "wb") as handle:
                handle.write(self.worker_job(cpu_total_s))
        except OSError:
            pass  # it died at once: seen as a crash below
        if not serve:
            os.close(zygote.req_w)
        return Worker(self, zygote.proc, zygote.resp_r, zygote.req_w if serve else -1)

    def spawn(self, serve: bool, stdio: tuple[int, int, int], cpu_total_s: float) -> "Worker":
        job_r, job_w = os.pipe()
        resp_r, resp_w = os.pipe()
        argv = [sys.executable, "-I", WORKER, str(job_r), str(resp_w)]
        fds = [job_r, resp_w]
        req_r = req_w = -1
        if serve:
            req_r, req_w = os.pipe()
            argv.append(str(req_r))
            fds.append(req_r)
        env = {**_WORKER_ENV, "HOME": self.scratch, "TMPDIR": self.scratch}
        proc = subprocess.Popen(
            argv,
            stdin=stdio[0],
            stdout=stdio[1],
            stderr=stdio[2],
            pass_fds=fds,
            cwd=self.scratch,
            env=env,
            preexec_fn=os.setpgrp,
        )
        for fd in fds:
            os.close(fd)
        try:
            with os.fdopen(job_w, "wb") as handle:
                handle.write(self.worker_job(cpu_total_s))
        except OSError:
            pass  # it died at once: seen as a crash below
        return Worker(self, proc, resp_r, req_w)

    # --- modes ------------------------------------------------------------------------------

    def scratch_file(self, data: bytes) -> int:
        try:
            fd = os.open(self.scratch, os.O_TMPFILE | os.O_RDWR, 0o600)
        except OSError:
            import tempfile

            fd, path = tempfile.mkstemp(dir=self.scratch)
            os.unlink(path)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
        return fd

    def run_stdin(self) -> None:
        cap = self.limits["output_bytes"]
        for index, text in self.job["tests"]:
            try:
                if self.zygote is not None:
                    fds = [os.dup(fd) for fd in self.zygote.files]
                    _pwrite_all(fds[0], text.encode("utf-8"))
                else:
                    fds = [
                        self.scratch_file(text.encode("utf-8")),
                        self.scratch_file(b""),
                        self.scratch_file(b""),
                    ]
            except OSError as exc:
                emit({"event": "test", "index": index, "status": "error", "error": f"scratch: {exc}"})
                continue
            if self.zygote is not None:
                worker = self.from_zygote(False, self.limits["cpu_s"])
            else:
                worker = self.spawn(False, (fds[0], fds[1], fds[2]), self.limits["cpu_s"])
            status, detail = "ok", ""
            try:
                worker.wait_ready()
                returncode = worker.wait_exit(self.limits["wall_s"])
                if returncode != 0:
                    status, detail = worker.exit_detail(returncode)
                    if returncode == 1:
                        reported = worker.pending_error()
                        status, detail = (
                            "error",
                            reported or _tail(fds[2]) or "the program exited with status 1",
                        )
            except Stop as stop:
                status, detail = stop.status, stop.detail
            finally:
                worker.close()
            size = os.fstat(fds[1]).st_size
            produced = b""
            if status == "ok" and size > cap:
                status, detail = "error", "output size limit exceeded"
            elif status == "ok":
                produced = os.pread(fds[1], size, 0)
            for fd in fds:
                os.close(fd)
            emit(
                {
                    "event": "test",
                    "index": index,
                    "status": status,
                    "error": detail,
                    "stdout_len": len(produced),
                },
                produced,
            )

    def serve_tests(self) -> None:
        mode = self.job["mode"]
        n = len(self.job["tests"])
        worker: Worker | None = None
        null = os.open(os.devnull, os.O_RDWR)
        try:
            extra: dict | str  # a call's output fields, or why it could not be sent
            for index, test in self.job["tests"]:
                status, detail, extra = "ok", "", {}
                try:
                    if worker is None:
                        cpu_total_s = self.limits["cpu_s"] * n + 2
                        if self.zygote is not None:
                            worker = self.from_zygote(True, cpu_total_s)
                        else:
                            worker = self.spawn(True, (null, null, null), cpu_total_s)
                        worker.wait_ready()
                        worker.deadline = time.monotonic() + self.limits["wall_s"]
                        if not worker.load():
                            return
                    worker.deadline = time.monotonic() + self.limits["wall_s"]
                    if mode == "call":
                        extra = self.one_call(worker, test)
                    else:
                        self.one_assert(worker, test)
                except Stop as stop:
                    status, detail = stop.status, stop.detail
                    if worker is not None:
                        worker.close()
                    worker = None
                except BaseException as exc:  # the test failed: an assert, or the program's error
                    status, detail = "error", _error_text(exc)
                if isinstance(extra, str):
                    status, detail, extra = "error", extra, {}
                emit({"event": "test", "index": index, "status": status, "error": detail, **extra})
        finally:
            if worker is not None:
                worker.close()
            os.close(null)

    def one_call(self, worker: "Worker", args: list) -> "dict | str":
        value = worker.call(self.job["fn_name"], args, {})
        try:
            return {"output": json.loads(json.dumps(value))}
        except (TypeError, ValueError, RecursionError):
            return f"unserialisable {value!r:.200}"

    def test_code(self, snippet: str) -> "types.CodeType":
        code = self.compiled.get(snippet)
        if code is None:
            code = self.compiled[snippet] = compile(snippet, "<test>", "exec")
        return code

    def wanted_names(self) -> "list[str]":
        """The program's names an assert test may see: those its code reads as globals (the
        program's functions called by name, helpers such as HumanEval's ``poly``) and the entry
        point; none in the other modes (a call goes by name)."""
        names: set = set()
        if self.job["mode"] != "assert":
            return []
        for _, snippet in self.job["tests"]:
            with contextlib.suppress(SyntaxError, ValueError):
                names |= _global_names(self.test_code(snippet))
        entry_point = self.job.get("entry_point")
        if entry_point:
            names.add(str(entry_point))
        return sorted(names)

    def one_assert(self, worker: "Worker", snippet: str) -> None:
        # Only what the test reads is taken from the program, and never a builtin's name or a
        # dunder: `def set(*a): return 0` or `abs = ...` in the program cannot change the test's
        # own `set` / `abs`. Builtins are this process's, which the program never ran in.
        code = self.test_code(snippet)
        namespace: dict = {"__name__": "__main__", "__builtins__": builtins}
        for name in _global_names(code):
            if name in worker.callables:
                namespace[name] = worker.proxy(name)
            elif name in worker.values:
                namespace[name] = worker.values[name]
        exec(code, namespace)
        entry_point = self.job.get("entry_point")
        if entry_point:
            if entry_point not in worker.callables:
                raise NameError(f"the program defines no function {entry_point!r}")
            check = namespace.get("check")
            if not callable(check) or getattr(check, "judger_proxy", False):
                raise NameError("the test defines no check(candidate) function")
            check(worker.proxy(entry_point))


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


_BUILTIN_NAMES = frozenset(vars(builtins))


def _global_names(code: "types.CodeType") -> set:
    """The global names ``code`` and the functions it defines may read, less builtins and dunders."""
    names: set = set()
    stack = [code]
    while stack:
        current = stack.pop()
        names.update(current.co_names)
        stack.extend(const for const in current.co_consts if hasattr(const, "co_names"))
    return {n for n in names if n not in _BUILTIN_NAMES and not n.startswith("__")}


def _pwrite_all(fd: int, data: bytes) -> None:
    view, at = memoryview(data), 0
    while at < len(view):
        at += os.pwrite(fd, view[at:], at)


def _tail(fd: int) -> str:
    size = os.fstat(fd).st_size
    text = os.pread(fd, 4096, max(0, size - 4096)).decode("utf-8", "replace")
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][:2000] if lines else ""


def _error_text(exc: BaseException) -> str:
    text = getattr(exc, "judger_text", None) or f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 2000 else text[:2000] + "..."


class Worker:
    """One worker process and the pipes to it."""

    def __init__(
        self, owner: Supervisor, proc: "subprocess.Popen[bytes] | Forked", resp_fd: int, req_fd: int
    ) -> None:
        self.owner = owner
        self.proc = proc
        self.resp_fd = resp_fd
        self.req_fd = req_fd
        self.buffer = b""
        self.deadline = time.monotonic() + owner.job["startup_s"]
        self.callables: list[str] = []
        self.values: dict = {}
        self.next_id = 0
        self.cap = owner.limits["output_bytes"] + _LINE_SLACK
        self.closed = False
        self.cpu_start = _children_cpu()  # workers are reaped one at a time: the delta is this one's

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.owner.reap(self.proc)
        for fd in (self.resp_fd, self.req_fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _late(self) -> Stop:
        if not getattr(self, "ready", False):
            return Stop("crashed", f"the sandbox did not start within {self.owner.job['startup_s']:g} s")
        return Stop("timeout", f"wall time limit of {self.owner.limits['wall_s']:g} s exceeded")

    def _gone(self) -> Stop:
        returncode = self.owner.reap(self.proc)
        self.closed = True
        return Stop(*self.exit_detail(returncode))

    def exit_detail(self, returncode: "int | None") -> "tuple[str, str]":
        """``crash_detail``, except that a SIGKILL after the worker spent its CPU seconds is the
        kernel's CPU hard limit (a program that ignores SIGXCPU meets it), not a crash."""
        if returncode == -signal.SIGKILL and _children_cpu() - self.cpu_start >= self.owner.limits["cpu_s"]:
            return "timeout", "CPU time limit exceeded"
        return crash_detail(returncode)

    def read_line(self) -> dict:
        while b"\n" not in self.buffer:
            left = self.deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise self._late()
            ready, _, _ = select.select([self.resp_fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.resp_fd, 1 << 16)
            if not chunk:
                raise self._gone()
            self.buffer += chunk
            if len(self.buffer) > self.cap and b"\n" not in self.buffer:
                self.close()
                raise Stop("error", "output size limit exceeded")
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            message = wire.loads(line)
        except wire.TooLarge as exc:  # refused before it could cost this process its memory
            self.close()
            raise Stop("error", f"the program's reply was refused: {exc}") from None
        except wire.WireError:
            message = None
        if not isinstance(message, dict):
            self.close()
            raise Stop("error", "the program wrote garbage to the judge's channel")
        return message

    def wait_ready(self) -> None:
        message = self.read_line()
        if message.get("event") == "unconfined":
            # the worker could not apply the limits: every sample would fail the same way, so the
            # host reports the judge's failure instead of scoring the program
            emit({"event": "sandbox_error", "error": str(message.get("error", ""))[:2000]})
            os._exit(3)
        if message.get("event") != "ready":
            self.close()
            raise Stop("error", "the program wrote garbage to the judge's channel")
        self.ready = True
        self.deadline = time.monotonic() + self.owner.limits["wall_s"]

    def pending_error(self) -> str:
        """The error the worker reported before exiting, if it is already in the pipe."""
        with contextlib.suppress(OSError):
            while select.select([self.resp_fd], [], [], 0)[0] and len(self.buffer) <= self.cap:
                chunk = os.read(self.resp_fd, 1 << 16)
                if not chunk:
                    break
                self.buffer += chunk
        for line in reversed(self.buffer.split(b"\n")):
            try:
                message = wire.loads(line)
            except wire.WireError:
                continue
            if isinstance(message, dict) and message.get("event") == "error":
                return str(message.get("error", ""))[:2000]
        return ""

    def wait_exit(self, wall_s: float) -> int | None:
        try:
            return self.proc.wait(wall_s)
        except subprocess.TimeoutExpired:
            raise self._late() from None

    def load(self) -> bool:
        message = self.read_line()
        if message.get("event") == "load_error":
            emit({"event": "load_error", "error": str(message.get("error", ""))[:2000]})
            return False
        if message.get("event") != "loaded":
            self.close()
            raise Stop("error", "the program wrote garbage to the judge's channel")
        try:
            self.callables = [str(name) for name in message.get("callables", [])]
            self.values = {str(k): wire.decode(v) for k, v in dict(message.get("values", {})).items()}
        except (wire.WireError, TypeError, ValueError):
            self.callables, self.values = [], {}
        return True

    def call(self, name: str, args: list, kwargs: dict) -> object:
        self.next_id += 1
        request = {
            "id": self.next_id,
            "name": name,
            "args": wire.encode(list(args)),
            "kwargs": wire.encode(kwargs),
        }
        try:
            data = memoryview(wire.dumps(request))
            while data:
                data = data[os.write(self.req_fd, data) :]
        except OSError:
            raise self._gone() from None
        while True:
            reply = self.read_line()
            if reply.get("id") == self.next_id:
                break
        if reply.get("ok") is True:
            try:
                return wire.decode(reply.get("value"))
            except wire.WireError as exc:
                raise TypeError(str(exc)) from None
        kind = getattr(builtins, str(reply.get("type", "")), None)
        text = str(reply.get("error", ""))[:2000]
        error: BaseException = RuntimeError(text)
        if isinstance(kind, type) and issubclass(kind, _CONTROL_FLOW):
            # re-raised as itself it would steer the test (a StopIteration ends `all(map(...))`
            # early, as if every item had passed): the test sees an error it cannot mistake
            error = ProgramRaised(text)
        elif isinstance(kind, type) and issubclass(kind, Exception) and kind.__module__ == "builtins":
            with contextlib.suppress(Exception):
                error = kind(text)
        error.judger_text = text  # type: ignore[attr-defined]
        raise error

    def proxy(self, name: str) -> object:
        def call(*args: object, **kwargs: object) -> object:
            return self.call(name, list(args), dict(kwargs))

        call.__name__ = name
        call.judger_proxy = True  # type: ignore[attr-defined]
        return call


def _reap_orphans() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def _shield() -> None:
    """Close what bubblewrap left open beyond stdio, and take no signal from the program: as pid 1
    of the namespace, the kernel then drops every signal sent from inside it (Python's own SIGINT
    handler would otherwise let the program raise KeyboardInterrupt in here)."""
    os.closerange(3, 1 << 16)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _undumpable() -> None:
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def main() -> None:
    _undumpable()
    _shield()
    try:
        zygote: Zygote | None = Zygote(os.getcwd())  # before the job is read: see Zygote
    except OSError:
        zygote = None
    job = json.loads(sys.stdin.buffer.read())
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    supervisor = Supervisor(job, zygote)
    emit({"event": "ready"})
    try:
        if job["mode"] == "stdin":
            supervisor.run_stdin()
        else:
            supervisor.serve_tests()
    except BaseException as exc:
        emit({"event": "load_error", "error": f"judge error: {_error_text(exc)}"})
    emit({"event": "done"})


if __name__ == "__main__":
    main()
