"""One exception tree: every exception class judger defines is a JudgerError, drawn in core/errors.py."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import judger
from judger.core import errors

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

# modules that need an optional dependency this environment may lack are skipped, not failed
_OPTIONAL = ("ray", "fastapi", "pyarrow", "math_verify", "torch", "trl", "verl", "uvicorn")


# programs run inside the code sandbox by its own interpreter, not library code a caller imports
_INSIDE_SANDBOX = "judger.runtime.sandbox.inside"


def _judger_modules() -> list[str]:
    names = [m.name for m in pkgutil.walk_packages(judger.__path__, "judger.")]
    return [n for n in names if not n.endswith("__main__") and not n.startswith(_INSIDE_SANDBOX)]


def _exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for name in _judger_modules():
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            if exc.name and exc.name.split(".")[0] in _OPTIONAL:
                continue
            raise
        for obj in vars(module).values():
            # private classes are control flow inside one module and never reach a caller
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__.startswith("judger.")
                and not obj.__qualname__.startswith("_")
            ):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


def test_every_judger_exception_is_a_judger_error() -> None:
    classes = _exception_classes()
    assert len(classes) >= 10
    strays = sorted(name for name, cls in classes.items() if not issubclass(cls, errors.JudgerError))
    assert strays == []


def test_every_exception_is_drawn_in_the_tree() -> None:
    doc = errors.__doc__ or ""
    missing = sorted({cls.__name__ for cls in _exception_classes().values()} - set(doc.split()))
    assert missing == [], f"add {missing} to the tree in judger/core/errors.py's docstring"


@pytest.mark.parametrize(
    ("cls", "builtin"), [(errors.ConfigError, ValueError), (errors.InputError, ValueError)]
)
def test_errors_keep_their_builtin_base(cls: type[Exception], builtin: type[Exception]) -> None:
    assert issubclass(cls, builtin) and issubclass(cls, errors.JudgerError)
