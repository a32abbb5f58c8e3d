"""What a ``reward_handler`` can be, and how each kind is called.

A handler is a sync function, an async function, an ``"package.module:function"`` import string,
or an ``http(s)://`` URL. Functions are called by keyword, exactly as XTuner calls them
(``reward_handler(response=..., label=..., extra_info=...)``), so the order of their parameters
does not matter and ``**kwargs`` handlers work; verl-style functions, recognised by a parameter
named ``solution_str``, are called as verl calls them (``compute_score(data_source=...,
solution_str=..., ground_truth=..., extra_info=...)``). A *batch* handler takes the same arguments
as lists, under the plural names (``responses, labels, extra_infos`` or verl's ``data_sources,
solution_strs, ground_truths, extra_infos``), and returns a list. A function that cannot take its
convention's keywords is refused when the judger is built, naming its parameters.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

HandlerKind = Literal["sync", "async", "url"]
Signature = Literal["judger", "verl"]

BATCH_ATTR = "__judger_batch__"

# The keyword names each convention calls a handler with, in the order of ``call_args``.
_NAMES: dict[tuple[Signature, bool], tuple[str, ...]] = {
    ("judger", False): ("response", "label", "extra_info"),
    ("judger", True): ("responses", "labels", "extra_infos"),
    ("verl", False): ("data_source", "solution_str", "ground_truth", "extra_info"),
    ("verl", True): ("data_sources", "solution_strs", "ground_truths", "extra_infos"),
}


def batch_handler(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Declare ``fn`` batch-capable: it takes lists and returns a list of the same length."""
    setattr(fn, BATCH_ATTR, True)
    return fn


def is_url(handler: object) -> bool:
    return isinstance(handler, str) and handler.startswith(("http://", "https://"))


def import_object(spec: str) -> Any:
    """Import ``"package.module:attr"`` (or ``"package.module.attr"``), with a clear error."""
    module_name, sep, attr = spec.partition(":")
    if not sep:
        module_name, _, attr = spec.rpartition(".")
    if not module_name or not attr:
        raise ValueError(f"import string {spec!r} must look like 'package.module:function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import module {module_name!r} of {spec!r}: {exc}") from exc
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(f"module {module_name!r} has no attribute {attr!r} (from {spec!r})") from None
    return obj


def _unwrap(fn: Any) -> Any:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn


def _is_async(fn: Any) -> bool:
    target = _unwrap(fn)
    return inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(
        getattr(target, "__call__", None)  # noqa: B004 - callable objects with async __call__
    )


def _parameters(fn: Callable[..., Any]) -> dict[str, inspect.Parameter] | None:
    try:
        return dict(inspect.signature(fn).parameters)
    except (TypeError, ValueError):  # some builtins and C callables have no signature
        return None


def _signature_style(fn: Callable[..., Any]) -> tuple[Signature, bool]:
    """Which calling convention ``fn`` speaks, and whether its parameter names say "batch"."""
    params = _parameters(fn) or {}
    if "solution_strs" in params:
        return "verl", True
    if "solution_str" in params:
        return "verl", False
    if "responses" in params:
        return "judger", True
    return "judger", False


def _keyword_names(fn: Callable[..., Any], signature: Signature, batched: bool) -> tuple[str, ...]:
    """The names ``fn`` is called with. A batch handler written with the singular names (or a
    single-sample one with the plural names) gets the lists under the names it declares."""
    names = _NAMES[(signature, batched)]
    params = _parameters(fn)
    if params is not None and names[0] not in params:
        other = _NAMES[(signature, not batched)]
        if other[0] in params:
            return other
    return names


def _check_callable_by_keyword(
    fn: Callable[..., Any], names: tuple[str, ...], kwargs: dict[str, Any]
) -> None:
    """Refuse, at build time, a handler that the keyword call would fail on (or feed wrongly)."""
    clash = sorted(set(names) & set(kwargs))
    if clash:
        raise ValueError(
            f"handler_kwargs {clash} collide with the arguments every call passes ({', '.join(names)})"
        )
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    # keywords supplied at call time by a wrapper (verl's reward_kwargs on a loaded RewardFunction)
    supplied = set(names) | set(kwargs) | set(getattr(fn, "reward_kwargs", None) or ())
    try:
        signature.bind_partial(**dict.fromkeys(names), **kwargs)
        missing = [
            p.name
            for p in signature.parameters.values()
            if p.default is p.empty
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            and p.name not in supplied
        ]
        if missing:
            raise TypeError(f"missing required argument(s) {missing}")
    except TypeError as exc:
        shown = getattr(fn, "__qualname__", None) or type(fn).__name__
        call = ", ".join(f"{n}=..." for n in names)
        raise TypeError(
            f"reward_handler {shown}{signature} cannot be called as {shown}({call}) ({exc}): handlers "
            "are called by keyword, as XTuner calls reward_handler(**input_kwargs) and verl calls "
            f"compute_score(data_source=..., solution_str=..., ground_truth=..., extra_info=...); "
            f"name its parameters {', '.join(names)} (in any order) or accept **kwargs"
        ) from None


@dataclass(slots=True)
class RewardHandler:
    """A resolved handler: the callable (or URL) plus how to call it."""

    target: Callable[..., Any] | str
    kind: HandlerKind
    batched: bool = False
    signature: Signature = "judger"
    kwargs: dict[str, Any] = field(default_factory=dict)
    spec: str | None = None  # the import string it came from, if any
    names: tuple[str, ...] = _NAMES[("judger", False)]  # the keywords of ``call``'s arguments
    # the target's first parameters are ``names`` in that order: a positional call binds exactly as
    # the keyword call does, for a fraction of its cost on the per-sample hot path
    positional: bool = False

    def describe(self) -> str:
        if isinstance(self.target, str):
            return self.target
        return self.spec or str(getattr(self.target, "__qualname__", repr(self.target)))

    def call_args(self, response: Any, label: Any, data_source: Any, extra_info: dict[str, Any]) -> tuple:
        if self.signature == "verl":
            return (data_source, response, label, extra_info)
        return (response, label, extra_info)

    def bind(self, *args: Any) -> dict[str, Any]:
        """The keyword arguments of one call, from :meth:`call_args`'s positional form."""
        named = dict(zip(self.names, args))
        if self.kwargs:
            named.update(self.kwargs)
        return named

    def call(self, *args: Any) -> Any:
        assert not isinstance(self.target, str)
        if self.positional:
            result = self.target(*args, **self.kwargs) if self.kwargs else self.target(*args)
        else:
            result = self.target(**self.bind(*args))
        if self.signature == "verl" and not inspect.isawaitable(result):
            return self.normalise(result)
        return result

    def normalise(self, result: Any) -> Any:
        """Bring a handler's result to judger's form (verl handlers may return bare floats)."""
        if self.signature != "verl":
            return result
        if self.batched and isinstance(result, (list, tuple)):
            return [normalise_verl_result(r) for r in result]
        return normalise_verl_result(result)


def resolve_handler(
    handler: Callable[..., Any] | str | None,
    *,
    batched: bool | None = None,
    kwargs: dict[str, Any] | None = None,
) -> RewardHandler:
    """Classify ``handler``. ``batched=None`` means: decide from the function itself."""
    if handler is None:
        raise ValueError(
            "reward_handler is None: pass a function, an async function, a 'package.module:function' "
            "import string or an http(s):// URL"
        )
    spec = None
    if is_url(handler):
        if batched:
            raise ValueError(
                "a URL reward_handler speaks the one-sample protocol; batched=True is not supported"
            )
        return RewardHandler(target=handler, kind="url")
    if isinstance(handler, str):
        spec = handler
        handler = import_object(handler)
    if not callable(handler):
        raise TypeError(
            f"reward_handler must be callable, an import string or a URL; got {type(handler).__name__}"
        )
    signature, named_batch = _signature_style(handler)
    declared = getattr(_unwrap(handler), BATCH_ATTR, None)
    is_batched = batched if batched is not None else bool(declared or named_batch)
    names = _keyword_names(handler, signature, is_batched)
    extra = dict(kwargs or {})
    _check_callable_by_keyword(handler, names, extra)
    return RewardHandler(
        target=handler,
        kind="async" if _is_async(handler) else "sync",
        batched=is_batched,
        signature=signature,
        kwargs=extra,
        spec=spec,
        names=names,
        positional=_binds_positionally(handler, names),
    )


def _binds_positionally(fn: Callable[..., Any], names: tuple[str, ...]) -> bool:
    """True when ``fn(*args)`` binds as ``fn(**dict(zip(names, args)))``: its first parameters are
    ``names``, in that order, each positional-or-keyword."""
    params = _parameters(fn)
    if params is None:
        return False
    first = list(params.values())[: len(names)]
    return len(first) == len(names) and all(
        p.name == name and p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p, name in zip(first, names)
    )


def normalise_verl_result(result: Any) -> Any:
    """verl's return convention: a dict stays; a number (or bool) becomes ``{"score": float}``;
    a tuple contributes its first item. Anything else is left for output validation to reject."""
    if isinstance(result, tuple) and result:
        result = result[0]
    if isinstance(result, bool):
        return {"score": float(result)}
    if isinstance(result, (int, float)) or (hasattr(result, "item") and getattr(result, "ndim", 1) == 0):
        return {"score": result}
    return result
