"""The API reference's griffe extension (mkdocs.yml loads it): judger's docstrings as the site shows them.

- Sphinx roles (``:func:`name```, ``:class:`~pkg.Name```, ``:mod:`.routes```), which the docstrings
  use for the editors' and Sphinx's sake, become code spans: Markdown has no roles, and a role left
  as it is shows its colons.
- ``name::`` ending a paragraph (reST's "a literal block follows") loses one colon.
- Every pydantic model gets a table of its fields (name, type, default, description) read from
  the model itself (``model_fields``, after inheritance and overrides: what a user's config gets),
  since the source shows ``DEFAULT_TIMEOUT`` where the user needs ``60.0``, and an inherited field
  nowhere. A model its module cannot be imported for fails the build, naming it.
- Every preset :mod:`judger.presets` finds (its registry: the preset modules) is a member of
  ``judger``, as at run time (``judger/__init__.py`` serves them from that registry, listing none),
  so ``::: judger.GSM8KJudgerConfig`` renders the class.
"""

from __future__ import annotations

import html
import importlib
import inspect
import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|class|mod|data|attr|meth|exc|obj|const|ref):`(~?)\.?([^`<]+?)`")
LITERAL_BLOCK = re.compile(r"(\S)::\n")
# a module prefix in a type's repr (``judger.core.rollout.Status`` -> ``Status``)
MODULE_PREFIX = re.compile(r"\b(?:[a-z_][a-z0-9_]*\.)+(?=[A-Za-z_])")


def _role(match: re.Match[str]) -> str:
    short, target = match.groups()
    return f"`{target.rsplit('.', 1)[-1] if short else target}`"


def markdown_docstring(text: str) -> str:
    return LITERAL_BLOCK.sub(r"\1:\n", ROLE.sub(_role, text))


def _is_model(cls: griffe.Class, seen: frozenset[str] = frozenset()) -> bool:
    """Whether ``cls`` derives from ``pydantic.BaseModel``, read from the source."""
    for base in cls.bases:
        path = base.canonical_path if isinstance(base, griffe.Expr) else str(base)
        if path.startswith("pydantic.") and path.endswith("BaseModel"):
            return True
        if path in seen or not path.startswith("judger."):
            continue
        try:
            parent = cls.modules_collection.get_member(path)
        except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
            continue
        target = parent.final_target if parent.is_alias else parent
        if isinstance(target, griffe.Class) and _is_model(target, seen | {path}):
            return True
    return False


def _type(annotation: Any, metadata: list[Any]) -> str:
    text = inspect.formatannotation(annotation) if annotation is not None else "Any"
    text = MODULE_PREFIX.sub("", text.replace("NoneType", "None"))
    bounds = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}
    for item in metadata:
        for attr, sign in bounds.items():
            value = getattr(item, attr, None)
            if value is not None:
                text += f", {sign} {value}"
    return text


def _default(field: Any) -> str:
    factory = field.default_factory
    if factory is not None:
        known = {dict: "{}", list: "[]", set: "set()", tuple: "()"}
        return f"`{known[factory]}`" if factory in known else "computed when built"
    return "required" if field.is_required() else f"`{field.default!r}`"


def _cell(text: str) -> str:
    """Prose in a table cell: one line, HTML shown as text, no column break."""
    return html.escape(" ".join(text.split()), quote=False).replace("|", "\\|")


def field_table(model: Any) -> str:
    rows = ["| field | type | default | description |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        description = _cell(field.description or "")
        kind = _type(field.annotation, field.metadata)  # a code span: shown as it is
        rows.append(f"| `{name}` | `{kind}` | {_default(field)} | {description} |")
    return "\n".join(rows)


class JudgerDocstrings(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.path == "judger":
            self._add_presets(pkg)
            self._visit(pkg)

    def _add_presets(self, pkg: griffe.Module) -> None:
        presets: Any = importlib.import_module("judger.presets")
        for name in presets.preset_names():
            if name not in pkg.members:
                target = f"{getattr(presets, name).__module__}.{name}"
                pkg.set_member(name, griffe.Alias(name, target, parent=pkg))

    def _visit(self, obj: griffe.Object) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown_docstring(obj.docstring.value)
        if isinstance(obj, griffe.Class) and _is_model(obj):
            self._add_fields(obj)
        for member in obj.members.values():
            if not member.is_alias:
                self._visit(member)  # type: ignore[arg-type]

    def _add_fields(self, cls: griffe.Class) -> None:
        try:
            model: Any = importlib.import_module(cls.module.path)
            for name in cls.path.removeprefix(cls.module.path + ".").split("."):
                model = getattr(model, name)
        except Exception as exc:
            raise RuntimeError(f"the API reference imports {cls.path} for its fields: {exc!r}") from exc
        if not hasattr(model, "model_fields"):
            return
        table = "**Fields**\n\n" + field_table(model)
        if cls.docstring is None:
            cls.docstring = griffe.Docstring(table, parent=cls)
        else:
            cls.docstring.value += "\n\n" + table
