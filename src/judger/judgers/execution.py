"""Where a sync reward handler runs: a killable worker process unless it is declared safe on threads.

A Python thread cannot be stopped: a sync call that never returns keeps its thread, and its CPU,
for the life of the process, and enough of them leave no thread for anything else. A worker
process can be killed at the deadline and replaced, so one hung call costs one sample. judger
cannot prove that a handler returns, so ``execution="auto"`` (the default) runs a sync handler in
the shared worker processes whenever a worker can load it (:func:`worker_modules`, then, before
the first call, a worker shown the pickled handler), which imports the handler's modules before it
takes calls:
an import string, or a function of an importable module. A handler no worker could load (a closure,
a lambda, a function of the script being run, a callable holding a lock) runs on threads as it always
did, and the build says so once, with why and the two ways out. ``execution="process"`` asks for
processes outright and is refused at build when no worker could load the handler;
``execution="thread"`` declares the handler safe on threads (it always returns) and is refused for
a handler that runs on no thread (async, or a URL).
"""

from __future__ import annotations

import importlib.machinery
import io
import logging
import pickle
import sys
import types
from dataclasses import dataclass
from typing import Any, Literal

from judger.judgers.handlers import RewardHandler

logger = logging.getLogger(__name__)

Execution = Literal["auto", "thread", "process"]
EXECUTIONS: tuple[str, ...] = ("auto", "thread", "process")
_MAIN_MODULES = ("__main__", "__mp_main__")


class _ModuleRecorder(pickle.Pickler):
    """A pickler that notes the module of every function and class it pickles by reference."""

    def __init__(self) -> None:
        super().__init__(io.BytesIO(), protocol=pickle.HIGHEST_PROTOCOL)
        self.modules: set[str] = set()

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, type)):
            module = getattr(obj, "__module__", None)
            if isinstance(module, str):
                self.modules.add(module)
        return NotImplemented


def _importable(module: str) -> bool:
    """Whether a fresh interpreter with this ``sys.path`` finds ``module``'s top-level package (a
    module loaded from a file under a made-up name is in ``sys.modules`` here, and nowhere else)."""
    top = module.partition(".")[0]
    if top in sys.builtin_module_names or importlib.machinery.FrozenImporter.find_spec(top) is not None:
        return True
    return importlib.machinery.PathFinder.find_spec(top, sys.path) is not None


def worker_modules(target: Any, *travelling: Any) -> tuple[tuple[str, ...], str | None]:
    """The modules a worker process imports to load ``target`` called with what ``travelling`` holds
    (its keyword arguments, the static ``extra_info``), and why it could not; None when it can.

    Functions and classes pickle by reference (module and name), so the call reaches a worker only
    when pickle takes it and every module it names can be imported there."""
    recorder = _ModuleRecorder()
    try:
        recorder.dump((target, *travelling))
    except Exception as exc:
        return (), f"it cannot be pickled ({type(exc).__name__}: {exc})"
    modules = tuple(sorted(recorder.modules))
    if set(modules) & set(_MAIN_MODULES):
        return (
            modules,
            "it is defined in the script being run (__main__), which a worker process does not import",
        )
    lost = [m for m in modules if not _importable(m)]
    if lost:
        where = "it was loaded from a file by path?"
        return modules, f"its module {lost[0]!r} cannot be imported by a worker process ({where})"
    return modules, None


@dataclass(frozen=True)
class Placement:
    """Where a handler runs: "process" or "thread" for a sync handler, "auto" for an async or URL one
    (the event loop); why threads under "auto"; what a worker imports to load the handler."""

    execution: str
    thread_reason: str | None = None
    modules: tuple[str, ...] = ()
    requested: str = "auto"


def resolve_execution(
    judger_name: str, handler: RewardHandler, requested: Any, extra_info: dict[str, Any]
) -> Placement:
    """Where ``handler`` runs (see the module docstring); every call also carries ``extra_info``,
    the judger's static one. ValueError, naming ``execution`` and the fix, for a request judger
    cannot honour."""
    if requested not in EXECUTIONS:
        raise ValueError(f"execution must be one of {EXECUTIONS}, got {requested!r}")
    if handler.kind != "sync":
        if requested != "auto":
            what = "an async function" if handler.kind == "async" else "a URL"
            raise ValueError(
                f"judger {judger_name!r}: execution={requested!r} places a sync reward_handler; this one is "
                f"{what}, which runs on the event loop: remove execution"
            )
        return Placement("auto")
    if requested == "thread":
        return Placement("thread")
    modules, reason = worker_modules(handler.target, handler.kwargs, extra_info)
    # here, not at module level: multiprocessing is what a judger that runs no process never loads
    import multiprocessing

    if reason is None and multiprocessing.current_process().daemon:
        reason = "this process is a daemonic multiprocessing worker, which may not start processes"
    if reason is None:
        return Placement("process", modules=modules, requested=requested)
    if requested == "process":
        shown = handler.describe()
        raise ValueError(
            f"judger {judger_name!r}: execution='process' runs reward_handler {shown} in worker processes, "
            f"and {reason}. Define it at the top level of an importable module (or give its "
            "'package.module:function' import string), or declare execution='thread' if it always returns"
        )
    say_threads(judger_name, handler, reason)
    return Placement("thread", thread_reason=reason)


def say_threads(judger_name: str, handler: RewardHandler, reason: str) -> None:
    """The one warning that a handler left to judger runs on threads, with why and the ways out."""
    logger.warning(
        "judger %r: reward_handler %s runs on threads, not in killable worker processes: %s. A call that "
        "never returns keeps its thread for good. Define it at the top level of an importable module (or "
        "give its import string) to run it in processes, or declare execution='thread' if it always returns",
        judger_name,
        handler.describe(),
        reason,
    )
