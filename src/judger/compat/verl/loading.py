"""Load a verl-style ``compute_score`` from a file or module so that it pickles.

verl's own loader runs a file as a module that is not in ``sys.modules``, so its functions cannot
be pickled (to worker processes, Ray actors). :func:`load_reward_function` registers the module
under a stable name and returns a :class:`RewardFunction` that pickles as where to load it from;
``reward_kwargs`` are merged into every call, config values winning, as in verl.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
from types import ModuleType
from typing import Any

from judger.judgers.handlers import BATCH_ATTR


def _module_name_for(path: str) -> str:
    stem = os.path.splitext(os.path.basename(path))[0]
    safe = "".join(c if c.isalnum() or c == "_" else "_" for c in stem)
    digest = hashlib.sha1(path.encode()).hexdigest()[:10]
    return f"judger_reward_{safe}_{digest}"


def _load_module(source: str | ModuleType) -> ModuleType:
    if isinstance(source, ModuleType):
        return source
    if os.path.isfile(source) or source.endswith(".py"):
        path = os.path.realpath(source)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"reward function file not found: {source!r}")
        name = _module_name_for(path)
        module = sys.modules.get(name)
        if module is not None and os.path.realpath(getattr(module, "__file__", "") or "") == path:
            return module
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load reward function file {source!r}")
        module = importlib.util.module_from_spec(spec)
        # registered before running it, so functions defined in it pickle by reference
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return module
    return importlib.import_module(source)


class RewardFunction:
    """A reward function loaded by :func:`load_reward_function`.

    Calls the function with ``reward_kwargs`` merged over the call's own keyword arguments (config
    values win, as in verl). It has the function's signature (so judger recognises verl-style
    single and batch functions) and pickles as *where to load it from*, so it reaches spawned
    processes and Ray actors even when the file is not importable there by module name.
    """

    def __init__(
        self, source: str, name: str = "compute_score", reward_kwargs: dict[str, Any] | None = None
    ) -> None:
        self.source = source
        self.name = name
        self.reward_kwargs = dict(reward_kwargs or {})
        module = _load_module(source)
        fn = getattr(module, name, None)
        if fn is None:
            raise AttributeError(f"reward function {name!r} not found in {source!r}")
        if not callable(fn):
            raise TypeError(f"{name!r} in {source!r} is not callable")
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", name)
        self.__qualname__ = getattr(fn, "__qualname__", name)
        self.__doc__ = getattr(fn, "__doc__", None)
        try:
            self.__signature__ = inspect.signature(fn)
        except (TypeError, ValueError):
            pass
        if getattr(fn, BATCH_ATTR, False):
            setattr(self, BATCH_ATTR, True)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **{**kwargs, **self.reward_kwargs})

    def __reduce__(self) -> tuple[Any, ...]:
        return (load_reward_function, (self.source, self.name, self.reward_kwargs))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.source!r}, {self.name!r}, reward_kwargs={self.reward_kwargs!r})"


class AsyncRewardFunction(RewardFunction):
    """:class:`RewardFunction` over an ``async def`` function (judger awaits it)."""

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return await self.fn(*args, **{**kwargs, **self.reward_kwargs})


def load_reward_function(
    path_or_module: str | ModuleType,
    name: str = "compute_score",
    reward_kwargs: dict[str, Any] | None = None,
) -> RewardFunction:
    """Load ``name`` from a ``.py`` file, a module name or a module, as verl's
    ``custom_reward_function`` (``path`` + ``name`` + ``reward_kwargs``) does.

    A file is imported as module ``judger_reward_<stem>_<hash of its path>`` and registered in
    ``sys.modules``, so its functions pickle by reference in this process and its forks; the
    returned :class:`RewardFunction` also pickles to fresh (spawned) processes. Use it directly as
    a ``reward_handler``: verl-style single or batch signatures are recognised by parameter names.
    """
    if isinstance(path_or_module, ModuleType):
        source = path_or_module.__name__
    else:
        source = os.fspath(path_or_module)
        if os.path.isfile(source):
            source = os.path.realpath(source)  # a spawned process may start in another directory
    fn = getattr(_load_module(source), name, None)
    cls = AsyncRewardFunction if inspect.iscoroutinefunction(fn) else RewardFunction
    return cls(source, name, reward_kwargs)
