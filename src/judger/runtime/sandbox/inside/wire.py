"""Plain values across the sandbox's process boundary, as one JSON line each.

Only built-in values cross (None, bool, int, float, str, bytes, list, tuple, dict, set, frozenset,
complex; NumPy scalars as their Python value): the judge decodes plain JSON into exact built-in
types, so a program cannot hand it an object whose ``__eq__`` it wrote. Both sides import this
file; it uses only the standard library.
"""

import base64
import json
import math
import re

# typing is not imported at run time (both sides start per sample); mypy treats the name as True
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_DEPTH = 200
# The most JSON values one message may decode into. A list costs ~60 bytes of memory for 3 bytes of
# JSON (``[],``), so the bytes read, already capped, do not bound what decoding builds: this does.
MAX_NODES = 250_000
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')  # a JSON string literal


class WireError(ValueError):
    """A value that cannot cross: not a plain built-in, too deep, or malformed."""


class TooLarge(WireError):
    """A message refused before it was decoded: more values than ``MAX_NODES``, or too deep."""


def encode(value: "Any", depth: int = 0) -> object:
    if depth > MAX_DEPTH:
        raise WireError("value nested too deeply")
    kind = type(value)
    if value is None or kind in (bool, int, str):
        return value
    if kind is float:
        return value if math.isfinite(value) else {"$f": repr(value)}
    if kind is list:
        return [encode(v, depth + 1) for v in value]
    if kind is tuple:
        return {"$t": [encode(v, depth + 1) for v in value]}
    if kind is dict:
        return {"$d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if kind is set:
        return {"$s": [encode(v, depth + 1) for v in value]}
    if kind is frozenset:
        return {"$fs": [encode(v, depth + 1) for v in value]}
    if kind is bytes:
        return {"$b": base64.b64encode(value).decode()}
    if kind is complex:
        return {"$c": [encode(value.real), encode(value.imag)]}
    # runs in the worker, where the program could send any plain value anyway: subclasses of
    # int / float / str and NumPy scalars cross as the plain value they stand for
    if isinstance(value, bool):
        return bool(value)
    for base in (int, float, str):
        if isinstance(value, base):
            return encode(base(value), depth + 1)
    if type(value).__module__ == "numpy" and getattr(value, "shape", None) == ():
        return encode(value.item(), depth + 1)
    raise WireError(f"a value of type {kind.__name__} cannot leave the sandbox (plain built-in types only)")


def _tagged(obj: dict) -> object:
    if len(obj) != 1:
        raise WireError("malformed value")
    ((tag, body),) = obj.items()
    if tag == "$f":
        if body not in ("nan", "inf", "-inf"):
            raise WireError("malformed float")
        return float(body)
    if tag == "$t":
        return tuple(body)
    if tag == "$d":
        return {k: v for k, v in body}
    if tag == "$s":
        return set(body)
    if tag == "$fs":
        return frozenset(body)
    if tag == "$b":
        return base64.b64decode(body)
    if tag == "$c":
        return complex(*body)
    raise WireError(f"unknown tag {tag!r}")


def _decode(obj: object, depth: int = 0) -> object:
    # json.loads has already built plain lists/dicts; only tagged dicts change
    if depth > 2 * MAX_DEPTH + 2:  # each level may be a tag plus its body
        raise WireError("value nested too deeply")
    if isinstance(obj, list):
        return [_decode(v, depth + 1) for v in obj]
    if isinstance(obj, dict):
        return _tagged({k: _decode(v, depth + 1) for k, v in obj.items()})
    return obj


def decode(obj: object) -> "Any":
    try:
        return _decode(obj)
    except WireError:
        raise
    except (TypeError, ValueError, RecursionError) as exc:
        raise WireError(f"malformed value: {type(exc).__name__}") from None


def _nodes(line: bytes) -> int:
    """An upper bound on the JSON values (keys included) in ``line``: each but the first follows a
    ``[``, ``{``, ``,`` or ``:``. Counted in C without decoding; the separators inside strings are
    dropped from the count only when the quick count, which includes them, is over the cap."""
    count = line.count(b"[") + line.count(b"{") + line.count(b",") + line.count(b":") + 1
    if count > MAX_NODES and b'"' in line:
        bare = _STRING.sub(b'""', line)
        count = bare.count(b"[") + bare.count(b"{") + bare.count(b",") + bare.count(b":") + 1
    return count


def loads(line: bytes) -> object:
    """``json.loads`` of one message; :class:`TooLarge` when it would build more than ``MAX_NODES``
    values (checked before decoding) or nests deeper than the interpreter can decode, WireError
    when it is not JSON."""
    if _nodes(line) > MAX_NODES:
        raise TooLarge(f"a message of more than {MAX_NODES} values (refused before decoding)")
    try:
        return json.loads(line)
    except RecursionError:
        raise TooLarge("a message nested too deeply to decode") from None
    except ValueError as exc:  # UnicodeDecodeError included
        raise WireError(f"malformed message: {exc}"[:200]) from None


def dumps(message: dict) -> bytes:
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()
