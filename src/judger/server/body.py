"""Request bodies as data: JSON parsed, then bounded in shape, before any model sees it.

A model validator can be far from linear in what a client controls (one ``/judge`` body with 300k
unknown keys once blocked the event loop for 54 s in RolloutState's did-you-mean hints, and its
error reply echoed every key). So the server parses with :func:`json.loads` (linear, in C), then
walks the result once, refusing it at the first limit it crosses: keys per object, nodes in all,
nesting depth, key length and string length. Only a body within every limit reaches validation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from judger.core.errors import JudgerError

# Error text echoed to a client is cut to this many characters: replies stay small whatever was sent.
MAX_ECHO = 64
# json.loads holds the GIL for its whole run, about 2.5 us a key: 300k keys stop every thread of
# the server for 0.75 s. A body has at most as many keys as colons; one with more colons than this
# is parsed (and refused, if it is over a limit) in a separate process.
KEY_BUDGET = 20_000
_CONTAINERS = (dict, list)


def costly(body: bytes) -> bool:
    """Whether parsing ``body`` could hold the interpreter long (an upper bound: one memchr pass)."""
    return body.count(b":") > KEY_BUDGET


def echo(value: object) -> str:
    """A short, safe rendering of a client-chosen value for an error message."""
    text = repr(value)
    return text if len(text) <= MAX_ECHO else text[: MAX_ECHO - 3] + "..."


class BodyError(JudgerError, ValueError):
    """A request body the server refuses; ``status`` is the HTTP code to answer with."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class BodyLimits:
    """Shape limits of a request body (each a 422 naming the limit and where it was crossed)."""

    max_keys_per_object: int = 1024
    max_nodes: int = 2_000_000
    max_depth: int = 32
    max_key_chars: int = 256
    max_string_chars: int = 8 * 1024 * 1024

    def __post_init__(self) -> None:
        for name in ("max_keys_per_object", "max_nodes", "max_depth", "max_key_chars", "max_string_chars"):
            if getattr(self, name) < 1:
                raise ValueError(f"BodyLimits.{name} must be >= 1")


def parse_json(body: bytes, limits: BodyLimits) -> Any:
    """The JSON value of ``body``, or :class:`BodyError` (400 malformed, 422 over a limit)."""
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BodyError(f"body: invalid JSON ({exc})", status=400) from None
    except RecursionError:
        raise BodyError(f"body: nested deeper than {limits.max_depth} levels") from None
    check_shape(value, limits)
    return value


def check_shape(value: Any, limits: BodyLimits) -> None:
    """Walk ``value`` once (iteratively: no recursion limit to hit) and enforce ``limits``.

    The walk keeps no paths (building one per node would cost more than the walk); the path of a
    violation is found afterwards, by a second search that runs only on the refused body.
    """
    if type(value) is dict or type(value) is list:
        _walk(value, limits)
    # a scalar body (null, a number) has nothing to walk; its endpoint says what it expected
    elif type(value) is str and len(value) > limits.max_string_chars:
        raise BodyError(f"body: {_too_long(value, limits.max_string_chars)}")


def _walk(root: dict[str, Any] | list[Any], limits: BodyLimits) -> None:
    """The walk of a container body: the first limit crossed raises."""
    nodes = 0
    max_keys, max_key, max_str, max_depth, max_nodes = (
        limits.max_keys_per_object,
        limits.max_key_chars,
        limits.max_string_chars,
        limits.max_depth,
        limits.max_nodes,
    )
    stack: list[tuple[Any, int]] = [(root, 0)]
    while stack:
        item, depth = stack.pop()
        if depth >= max_depth:
            raise BodyError(f"{_path_to(root, item)}: nested deeper than {max_depth} levels")
        nodes += len(item)
        if type(item) is dict:
            if len(item) > max_keys:
                raise BodyError(f"{_path_to(root, item)}: object with {len(item)} keys > limit of {max_keys}")
            for key, child in item.items():
                if len(key) > max_key:
                    where = _path_to(root, item)
                    raise BodyError(f"{where}: key {echo(key)} longer than {max_key} characters")
                kind = type(child)
                if kind is str:
                    if len(child) > max_str:
                        raise BodyError(f"{_path_to(root, item)}.{key}: {_too_long(child, max_str)}")
                elif kind in _CONTAINERS:
                    stack.append((child, depth + 1))
        else:  # a list (strings and scalars are checked where they are found)
            for child in item:
                kind = type(child)
                if kind is str:
                    if len(child) > max_str:
                        raise BodyError(f"{_path_to(root, item)}[...]: {_too_long(child, max_str)}")
                elif kind in _CONTAINERS:
                    stack.append((child, depth + 1))
        if nodes > max_nodes:
            raise BodyError(f"body: more than {max_nodes} keys and items in all")


def _too_long(text: str, limit: int) -> str:
    return f"string of {len(text)} characters > limit of {limit}"


def _path_to(root: Any, target: Any) -> str:
    """Where ``target`` (found by identity) sits in ``root``, as ``a.b[3].c``; only on errors."""
    stack: list[tuple[Any, str]] = [(root, "")]
    while stack:
        item, path = stack.pop()
        if item is target:
            return path or "body"
        if type(item) is dict:
            for key, child in item.items():
                if type(child) in (dict, list):
                    stack.append((child, f"{path}.{echo(key)[1:-1]}" if path else echo(key)[1:-1]))
        elif type(item) is list:
            for i, child in enumerate(item):
                if type(child) in (dict, list):
                    stack.append((child, f"{path}[{i}]"))
    return "body"
