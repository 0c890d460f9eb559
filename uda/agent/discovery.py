"""What an agent may ask about: element types, relations, filterable fields.

Everything here is derived from the ontology registry and from `uda.query.filters` — the same
sources the planner validates against — so a field the tools list is a field a search
accepts, and a user's own element subclass shows up without anyone editing a list.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping
from datetime import date, datetime
from enum import Enum
from typing import Any

from connectors.contract.predicates import Op
from ontology import Element, element_class, element_types, relation_spec, relation_types
from uda.agent.models import (
    ElementTypeInfo,
    ElementTypesAnswer,
    FilterField,
    FilterFieldsAnswer,
    RelationInfo,
    RelationsAnswer,
)
from uda.errors import UnknownElementTypeError, UnknownFilterFieldError
from uda.query.filters import filterable_fields
from uda.query.filters.grammar import operator_allowed

FILTER_SYNTAX = (
    'filters is an object {field: condition}. condition is a value ({"status": "accepted"}), '
    'a list meaning any of ({"element_type": ["Document", "Decision"]}), or operators '
    '({"timestamp": {"$gte": "2025-01-01"}}). Operators: '
    + ", ".join(op.value for op in Op)
    + ". Several fields must all match."
)


def _operators(annotation: Any) -> list[str]:
    """The operators a field of this annotation takes: THE grammar's rule, listed."""
    return [op.value for op in Op if operator_allowed(op, annotation)]


def _classes() -> list[type[Element]]:
    return [cls for name in element_types() if (cls := element_class(name)) is not None]


def _unwrap(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0] if len(args) == 1 else str
    return annotation


def describe_type(annotation: Any) -> tuple[str, list[str] | None, list[str]]:
    """A field annotation as (type name, fixed values or None, valid operators).

    The operators are the grammar's (`operator_allowed`), as `discover_filter_paths` lists
    them: enumerations and booleans take equality, membership and `$exists` only; patterns
    (`$like`, `$ilike`) are for strings.
    """
    target = _unwrap(annotation)
    operators = _operators(annotation)
    if isinstance(target, type) and issubclass(target, Enum):
        return "enum", [str(m.value) for m in target], operators
    if target is bool:
        return "boolean", None, operators
    if target is datetime:
        return "datetime (ISO 8601)", None, operators
    if target is date:
        return "date (ISO 8601)", None, operators
    if target is int:
        return "integer", None, operators
    if target is float:
        return "number", None, operators
    return "string", None, operators


def filter_fields(element_type: str | None = None) -> FilterFieldsAnswer:
    """Every filterable field with its type, values, operators and owning element types.

    Raises:
        UnknownElementTypeError: `element_type` is not registered.
    """
    classes = _classes()
    if element_type is not None:
        classes = [c for c in classes if c.type_name() == element_type]
        if not classes:
            message = _sentence(
                f"no element type named {element_type!r}"
                + _did_you_mean(element_type, element_types())
            )
            raise UnknownElementTypeError(
                f"{message} Element types: {', '.join(element_types())}.",
                field="element_type",
                value=element_type,
            )
    out: list[FilterField] = []
    for name, annotation in sorted(filterable_fields().items()):
        owners = [
            c.type_name() for c in classes if name == "element_type" or name in c.model_fields
        ]
        if not owners:
            continue
        kind, values, operators = describe_type(annotation)
        if name == "element_type":
            kind, values = "enum", element_types()  # a string field with known values
        out.append(
            FilterField(
                name=name, type=kind, values=values, operators=operators, element_types=owners
            )
        )
    return FilterFieldsAnswer(fields=out, syntax=FILTER_SYNTAX)


def _relations_from(cls: type[Element]) -> list[str]:
    names: list[str] = []
    for name in relation_types():
        spec = relation_spec(name)
        if spec is not None and any(base.__name__ in spec.sources for base in cls.__mro__):
            names.append(name)
    return names


def element_type_infos() -> ElementTypesAnswer:
    """Every registered element type: searchable or context only, its fields and relations."""
    infos: list[ElementTypeInfo] = []
    for cls in _classes():
        doc = (cls.__doc__ or "").strip().splitlines()
        infos.append(
            ElementTypeInfo(
                name=cls.type_name(),
                searchable=cls.knowledge_asset,
                description=doc[0] if doc else "",
                fields=[f for f in cls.model_fields if f not in ("extras", "hlc", "version")],
                relations_out=_relations_from(cls),
            )
        )
    return ElementTypesAnswer(element_types=infos)


def relation_infos() -> RelationsAnswer:
    """Every registered relation type and the element types it links."""
    infos: list[RelationInfo] = []
    for name in relation_types():
        spec = relation_spec(name)
        if spec is not None:
            infos.append(
                RelationInfo(
                    name=name,
                    sources=list(spec.sources),
                    targets=list(spec.targets),
                    description=spec.description,
                )
            )
    return RelationsAnswer(relations=infos)


def _did_you_mean(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=2, cutoff=0.6)
    if not close:
        close = [k for k in known if name.lower() in k.lower() or k.lower() in name.lower()][:2]
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def _sentence(text: str) -> str:
    return text if text.endswith(("?", ".")) else text + "."


def check_filter_fields(filters: Mapping[str, object]) -> None:
    """Reject unknown filter fields with guidance, before any backend is asked.

    An unknown field would otherwise be a dead end for a model ("no results" or a terse
    error); naming the closest field and the discovery tool lets it correct itself.

    Raises:
        UnknownFilterFieldError: the first unknown field, with a suggestion.
    """
    known = sorted(filterable_fields())
    for name in filters:
        if name in known:
            continue
        if name.lower().startswith("clearance"):
            hint = (
                "; clearance is fixed by the deployment for the whole conversation and "
                "cannot be set or widened in a tool call"
            )
        else:
            hint = _did_you_mean(name, known)
        message = _sentence(f"no field named {name!r}{hint}")
        raise UnknownFilterFieldError(
            f"{message} Call list_filter_fields to see every field with its type and "
            f"operators. Fields: {', '.join(known)}.",
            field=f"filters.{name}",
            value=name,
        )
