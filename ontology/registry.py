"""Registries of element types and relation types.

Element classes register themselves when they are defined (see `Element`); relation types are
registered with `register_relation`. Lookups of unknown names return `None` so that callers can
raise an error that names the offending field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ontology.elements import Element

_ELEMENT_CLASSES: dict[str, type[Element]] = {}


def register_element_class(cls: type[Element]) -> None:
    """Register `cls` under its type name; a different class may not take a taken name."""
    if cls.__dict__.get("__abstract__", False):
        return
    name = cls.type_name()
    existing = _ELEMENT_CLASSES.get(name)
    if existing is not None and existing.__qualname__ != cls.__qualname__:
        raise TypeError(
            f"element type {name!r} is already registered by "
            f"{existing.__module__}.{existing.__qualname__}"
        )
    _ELEMENT_CLASSES[name] = cls


def element_class(name: str) -> type[Element] | None:
    """The class registered for element type `name`, or None."""
    return _ELEMENT_CLASSES.get(name)


def element_types() -> list[str]:
    """Every registered element type name, sorted."""
    return sorted(_ELEMENT_CLASSES)


def knowledge_asset_types() -> list[str]:
    """Registered element types that carry text and are searched."""
    return sorted(n for n, c in _ELEMENT_CLASSES.items() if c.knowledge_asset)


@dataclass(frozen=True, kw_only=True)
class RelationSpec:
    """A relation type: its name, and which element types it may link (by class, subclasses too)."""

    name: str
    sources: tuple[str, ...] = ("Element",)
    targets: tuple[str, ...] = ("Element",)
    description: str = ""

    def allows(self, source: type[Element], target: type[Element]) -> bool:
        """Whether an edge from an element of `source` type to one of `target` type fits."""
        return _matches(source, self.sources) and _matches(target, self.targets)


def _matches(cls: type[Element], names: tuple[str, ...]) -> bool:
    return any(base.__name__ in names for base in cls.__mro__)


_RELATIONS: dict[str, RelationSpec] = {}


def register_relation(spec: RelationSpec) -> RelationSpec:
    """Register a relation type; re-registering the same spec is a no-op."""
    existing = _RELATIONS.get(spec.name)
    if existing is not None and existing != spec:
        raise TypeError(f"relation {spec.name!r} is already registered differently")
    _RELATIONS[spec.name] = spec
    return spec


def relation_spec(name: str) -> RelationSpec | None:
    """The spec of relation type `name`, or None."""
    return _RELATIONS.get(name)


def relation_types() -> list[str]:
    """Every registered relation type name, sorted."""
    return sorted(_RELATIONS)
