"""The judger behind a verl reward manager: what verl hands the manager as ``compute_score`` (and
the manager's ``judger`` option) made into one judger whose ``batch_judge`` scores a batch.

verl's or judger's ``default_compute_score`` becomes judger's router by ``data_source``, with the
options bound on it applied or refused by name (:mod:`.default_options`); any other function is
called as verl's managers call it (keywords, ``async def`` awaited, a float result also recorded as
``acc``); ``judger`` (a judger, a judger config, an import string or a factory of one) replaces
both, and is refused together with either.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from judger.compat.verl.default_options import DefaultOptions
from judger.core.judger import BaseJudger
from judger.judgers.config import JudgerConfig
from judger.judgers.handlers import import_object


def get_option(obj: Any, key: str, default: Any = None) -> Any:
    """``obj[key]`` of a mapping or an OmegaConf node, else its attribute, else ``default``."""
    if obj is None:
        return default
    if isinstance(obj, Mapping) or hasattr(obj, "get"):
        try:
            return obj.get(key, default)
        except Exception:
            pass
    return getattr(obj, key, default)


def plain(value: Any) -> Any:
    """An OmegaConf node as plain Python (lists, dicts), anything else unchanged."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(value, (DictConfig, ListConfig)):
            return OmegaConf.to_container(value, resolve=True)
    except ImportError:
        pass
    return value


def unwrap_verl_partial(fn: Any) -> tuple[Any, dict[str, Any]]:
    """verl wraps a custom reward function as ``partial(_call_with_kwargs, raw_fn, reward_kwargs)``."""
    if isinstance(fn, functools.partial) and getattr(fn.func, "__name__", "") in (
        "_call_with_kwargs",
        "_call_with_kwargs_async",
    ):
        raw, kwargs = fn.args[0], dict(fn.args[1]) if len(fn.args) > 1 else {}
        return raw, {**kwargs, **(fn.keywords or {})}
    return fn, {}


def partial_keywords(fn: Any) -> dict[str, Any]:
    """The keywords bound on ``fn`` by ``functools.partial`` (verl binds its SandboxFusion settings so)."""
    keywords: dict[str, Any] = {}
    while isinstance(fn, functools.partial):
        keywords = {**(fn.keywords or {}), **keywords}
        fn = fn.func
    return keywords


def is_default_compute_score(fn: Any) -> bool:
    """verl's own default scorer, or judger's (however verl loaded it: by package or file path)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if getattr(fn, "target", None) == "judger.compat.verl.compute_score:default_compute_score":
        return True
    module = getattr(fn, "__module__", "") or ""
    return getattr(fn, "__name__", "") == "default_compute_score" and module.startswith(
        "verl.utils.reward_score"
    )


def is_judger_like(obj: Any) -> bool:
    """A judger or a judger config (something with ``build``), not a function."""
    return isinstance(obj, BaseJudger) or (hasattr(obj, "build") and not callable(obj))


def verl_result(result: Any) -> Any:
    """What verl's managers make of a result: a dict as it is; a number is the score and also
    ``acc`` (verl records ``reward_extra_info["acc"] = score`` for a function returning a float)."""
    if isinstance(result, Mapping):
        return result
    if isinstance(result, tuple) and result:
        result = result[0]
    if hasattr(result, "item"):
        result = result.item()
    if isinstance(result, (bool, int, float)):
        return {"score": float(result), "acc": float(result)}
    return result


class VerlCall:
    """A verl ``compute_score`` called as verl calls it (keywords), as a judger handler."""

    def __init__(self, fn: Callable[..., Any], kwargs: dict[str, Any]) -> None:
        self.fn = fn
        self.kwargs = kwargs

    def __call__(self, data_source: Any, solution_str: Any, ground_truth: Any, extra_info: Any = None) -> Any:
        return verl_result(
            self.fn(
                data_source=data_source,
                solution_str=solution_str,
                ground_truth=ground_truth,
                extra_info=extra_info,
                **self.kwargs,
            )
        )


class AsyncVerlCall(VerlCall):
    """:class:`VerlCall` over an ``async def`` function: awaited, as verl's managers await it."""

    async def __call__(
        self, data_source: Any, solution_str: Any, ground_truth: Any, extra_info: Any = None
    ) -> Any:
        return verl_result(
            await self.fn(
                data_source=data_source,
                solution_str=solution_str,
                ground_truth=ground_truth,
                extra_info=extra_info,
                **self.kwargs,
            )
        )


def build_judger(option: Any) -> BaseJudger:
    """The ``judger`` option: a judger, a judger config, an import string or a factory of one."""
    obj = import_object(option) if isinstance(option, str) else option
    if isinstance(obj, BaseJudger):
        return obj
    if hasattr(obj, "build") and not isinstance(obj, type):
        return obj.build()
    if callable(obj):
        return build_judger(obj())
    raise TypeError(f"reward_kwargs.judger={option!r} is not a judger, a judger config or a factory of one")


def custom_judger(raw_fn: Any, call_kwargs: dict[str, Any]) -> BaseJudger:
    """A judger over a user's verl ``compute_score`` (its batch form passed through as a batch
    handler), with ``call_kwargs`` added to every call."""
    handler: Any = raw_fn
    if "solution_strs" not in inspect.signature(raw_fn).parameters:
        is_async = inspect.iscoroutinefunction(raw_fn) or inspect.iscoroutinefunction(
            getattr(raw_fn, "__call__", None)  # noqa: B004 - an object with an async __call__
        )
        handler = (AsyncVerlCall if is_async else VerlCall)(raw_fn, call_kwargs)
    return JudgerConfig(
        judger_name=getattr(raw_fn, "__name__", "compute_score"),
        reward_handler=handler,
        handler_kwargs=call_kwargs if handler is raw_fn else {},
    ).build()


def manager_judger(
    who: str,
    compute_score: Any,
    judger_option: Any,
    defaults: DefaultOptions,
    genrm: dict[str, Any],
) -> BaseJudger:
    """The judger of manager ``who``: ``judger_option``, else judger's router (for the default
    function), else ``compute_score`` with ``genrm`` (verl's reward-model keywords) on each call."""
    raw_fn, fn_kwargs = unwrap_verl_partial(compute_score)
    custom_fn = raw_fn is not None and not is_default_compute_score(raw_fn)
    default_kwargs = {} if custom_fn else {**partial_keywords(raw_fn), **fn_kwargs}
    if judger_option is not None and (custom_fn or default_kwargs):
        # one of the two would be silently ignored: refuse rather than pick
        what = (
            f"a custom compute_score ({getattr(raw_fn, '__name__', raw_fn)!r})"
            if custom_fn
            else f"default_compute_score options {sorted(default_kwargs)}"
        )
        raise ValueError(
            f"{who}: both reward_kwargs.judger and {what} are set; keep one: drop "
            "custom_reward_function.path (or reward.sandbox_fusion.url), or drop reward_kwargs.judger"
        )
    if judger_option is not None:
        return build_judger(judger_option)
    if not custom_fn:
        return defaults.judger_config().build()
    return custom_judger(raw_fn, {**genrm, **fn_kwargs})  # reward_kwargs win, as in verl's _call_with_kwargs


def default_function_options(compute_score: Any, who: str) -> DefaultOptions:
    """The options bound on the default function (by verl's SandboxFusion partial, or given in
    ``custom_reward_function.reward_kwargs``); none for a custom function."""
    raw_fn, fn_kwargs = unwrap_verl_partial(compute_score)
    if raw_fn is not None and not is_default_compute_score(raw_fn):
        return DefaultOptions.parse({}, who)
    return DefaultOptions.parse({**partial_keywords(raw_fn), **fn_kwargs}, who)
