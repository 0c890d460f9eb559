"""Turn what callers pass to `ingest` into typed, validated elements and relations.

Every rejection is a `UserError` naming the field and value; nothing is written before the
whole batch has passed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from pydantic import ValidationError

from connectors.contract.characters import forbidden_character
from ontology import Element, Relation, element_class, element_types, relation_spec, relation_types
from uda.errors import (
    InvalidElementError,
    MissingElementError,
    UnknownElementTypeError,
    UnknownRelationError,
)

ElementInput = Element | Mapping[str, Any]
RelationInput = Relation | Mapping[str, Any] | Sequence[str]


def coerce_elements(items: Iterable[ElementInput]) -> list[Element]:
    """Typed elements from objects or dicts (`{"element_type": "Document", ...}`), de-duplicated.

    Raises:
        UnknownElementTypeError: a type that is not registered.
        InvalidElementError: a field fails validation, or one id comes twice with different
            content.
    """
    out: dict[str, Element] = {}
    for position, item in enumerate(items):
        element = _coerce_element(item, position)
        _refuse_forbidden_characters(element.model_dump(mode="json"), f"elements[{position}]")
        previous = out.get(element.element_id)
        if previous is not None and previous.content_hash() != element.content_hash():
            raise InvalidElementError(
                f"elements[{position}]: element_id {element.element_id!r} appears twice in the "
                "batch with different content",
                field=f"elements[{position}].element_id",
                value=element.element_id,
            )
        out[element.element_id] = element
    return list(out.values())


def _coerce_element(item: ElementInput, position: int) -> Element:
    if isinstance(item, Element):
        cls = element_class(item.type_name())
        if cls is not type(item):
            raise UnknownElementTypeError(
                f"elements[{position}]: element type {item.type_name()!r} is not registered",
                field=f"elements[{position}].element_type",
                value=item.type_name(),
            )
        return item
    if not isinstance(item, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise InvalidElementError(
            f"elements[{position}]: expected an ontology element or a dict, got "
            f"{type(item).__name__}",
            field=f"elements[{position}]",
            value=item,
        )
    data = dict(item)
    type_name = data.pop("element_type", None)
    cls = element_class(str(type_name)) if type_name is not None else None
    if cls is None:
        raise UnknownElementTypeError(
            f"elements[{position}].element_type: unknown element type {type_name!r}; "
            f"known: {', '.join(element_types())}",
            field=f"elements[{position}].element_type",
            value=type_name,
        )
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise InvalidElementError(
            f"elements[{position}].{loc}: {first['msg']} (got {first.get('input')!r})",
            field=f"elements[{position}].{loc}",
            value=first.get("input"),
        ) from None


def _refuse_forbidden_characters(data: Mapping[str, Any], where: str) -> None:
    """Refuse NUL and lone surrogates in any string of `data`, on every profile alike.

    Raises:
        InvalidElementError: naming the field (`elements[3].text`) and the character.
    """
    stack: list[tuple[object, str]] = [(v, f"{where}.{k}") for k, v in data.items()]
    while stack:
        value, path = stack.pop()
        if isinstance(value, str):
            problem = forbidden_character(value)
            if problem is not None:
                raise InvalidElementError(
                    f"{path}: holds {problem}, which PostgreSQL cannot store; UDA refuses it "
                    "on every profile, so that a corpus behaves the same everywhere: remove it",
                    field=path,
                    value=None,
                )
        elif isinstance(value, Mapping):
            items = cast("Mapping[object, object]", value).items()
            stack.extend((v, f"{path}.{k}") for k, v in items)
        elif isinstance(value, list | tuple):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(cast("Sequence[object]", value)))


def coerce_relations(items: Iterable[RelationInput]) -> list[Relation]:
    """Typed relations from objects, dicts or `(source_id, relation, target_id)` triples."""
    out: dict[tuple[str, str, str], Relation] = {}
    for position, item in enumerate(items):
        try:
            if isinstance(item, Relation):
                relation = item
            elif isinstance(item, Mapping):
                relation = Relation.model_validate(dict(item))
            else:
                source, name, target = item
                relation = Relation(source_id=source, relation=name, target_id=target)
        except (ValidationError, ValueError, TypeError) as exc:
            detail = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
            raise InvalidElementError(
                f"relations[{position}]: {detail}", field=f"relations[{position}]", value=item
            ) from None
        _refuse_forbidden_characters(
            {
                "source_id": relation.source_id,
                "relation": relation.relation,
                "target_id": relation.target_id,
            },
            f"relations[{position}]",
        )
        if relation_spec(relation.relation) is None:
            raise UnknownRelationError(
                f"relations[{position}].relation: unknown relation {relation.relation!r}; "
                f"known: {', '.join(relation_types())}",
                field=f"relations[{position}].relation",
                value=relation.relation,
            )
        out[relation.key] = relation
    return list(out.values())


def check_endpoints(relations: Sequence[Relation], types_by_id: Mapping[str, str]) -> None:
    """Every endpoint exists (in the batch or the store) and fits the relation's spec.

    Raises:
        MissingElementError: an endpoint is unknown (or deleted).
        UnknownRelationError: the relation does not link elements of these types.
    """
    for position, relation in enumerate(relations):
        for end in ("source_id", "target_id"):
            element_id = getattr(relation, end)
            if element_id not in types_by_id:
                raise MissingElementError(
                    f"relations[{position}].{end}: no element {element_id!r} in the batch or "
                    "the store",
                    field=f"relations[{position}].{end}",
                    value=element_id,
                )
        spec = relation_spec(relation.relation)
        source_cls = element_class(types_by_id[relation.source_id])
        target_cls = element_class(types_by_id[relation.target_id])
        if spec is None or source_cls is None or target_cls is None:
            continue  # unregistered types were rejected earlier
        if not spec.allows(source_cls, target_cls):
            raise UnknownRelationError(
                f"relations[{position}]: {relation.relation!r} does not link "
                f"{source_cls.type_name()} -> {target_cls.type_name()} (allowed: "
                f"{'/'.join(spec.sources)} -> {'/'.join(spec.targets)})",
                field=f"relations[{position}].relation",
                value=relation.relation,
            )
