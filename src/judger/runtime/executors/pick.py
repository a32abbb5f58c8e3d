"""The one function that decides where a judger's calls run, from what they need."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from judger.runtime.executors.base import Executor, Needs
from judger.runtime.threads import DEFAULT_MAX_HUNG

if TYPE_CHECKING:
    from judger.runtime.procpool.pool import ProcessPool


@dataclass(frozen=True)
class Setting:
    """What the executors are built with (each reads its own): the judger's name for threads and
    errors; ``limit`` coroutines at once; the thread budget; the process pool (None: the shared one)
    and the modules its workers import first; the HTTP client's timeout and retries; the sandbox's."""

    name: str
    limit: int = 1
    raise_errors: bool = False
    num_threads: int = 1
    max_hung: int = DEFAULT_MAX_HUNG
    pool: ProcessPool | None = None
    modules: tuple[str, ...] = ()
    request_timeout: float = 30.0
    max_retries: int = 3
    sandbox: dict[str, Any] = field(default_factory=dict)


def pick_executor(needs: Needs, setting: Setting) -> Executor:
    """The executor for ``needs``: a URL -> HTTP; async -> coroutines on the loop; an untrusted
    program -> a sandbox per call; bounded sync -> inline; sync that may hang -> killable worker
    processes; sync declared safe -> threads. Each module is imported only when picked: a judger
    that posts nothing never imports httpx, one that runs no process never multiprocessing."""
    if needs.kind == "url":
        from judger.runtime.executors.http import HttpExecutor

        return HttpExecutor(
            setting.name,
            setting.limit,
            raise_errors=setting.raise_errors,
            request_timeout=setting.request_timeout,
            max_retries=setting.max_retries,
        )
    if needs.kind == "async":
        from judger.runtime.executors.coroutine import CoroutineExecutor

        return CoroutineExecutor(setting.name, setting.limit, raise_errors=setting.raise_errors)
    if needs.isolation:
        from judger.runtime.executors.sandbox import SandboxExecutor

        return SandboxExecutor(setting.name, **setting.sandbox)
    if needs.on_loop:
        from judger.runtime.executors.inline import InlineExecutor

        return InlineExecutor()
    if needs.may_hang:
        from judger.runtime.executors.process import ProcessExecutor

        return ProcessExecutor(setting.pool, setting.modules)
    from judger.runtime.executors.thread import ThreadExecutor

    return ThreadExecutor(setting.name, setting.num_threads, setting.max_hung)
