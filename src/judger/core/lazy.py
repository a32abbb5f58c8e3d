"""Package attributes that import their module on first use, so importing a package stays cheap
(and free of optional dependencies such as Ray) until one of its names is asked for."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping

TYPE_CHECKING = False  # typing itself costs ``import judger`` more than the rest of it
if TYPE_CHECKING:
    from typing import Any


def lazy_exports(
    package: str, names: Mapping[str, str], fallback: Callable[[str], object] | None = None
) -> Callable[[str], Any]:
    """A module ``__getattr__`` serving ``names`` (attribute -> module path) for ``package``, then
    asking ``fallback`` (if given) for any other name.

    Each value is cached in the package's namespace, so a name is imported and looked up once
    (``__all__`` excepted: its fallback is asked each time).
    """

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            if fallback is None:
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            value = fallback(name)
            if name != "__all__":
                setattr(importlib.import_module(package), name, value)
            return value
        value = getattr(importlib.import_module(module), name)
        setattr(importlib.import_module(package), name, value)
        return value

    return __getattr__
