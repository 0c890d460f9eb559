"""Discovery: every path a filter may name, how it may be compared, and what values it holds.

`filter_paths(prefix)` lists the element's own fields (those a searchable element type has:
a filter selects results, and only searchable elements are results) and the relation paths
built from the ontology's relation specs: `partOf.name` reads an element reached over an
outgoing `partOf` edge, `~governedBy.status` one reached over an incoming `governedBy` edge;
a path is listed when the near end of the relation can be a searchable element and the far
end has the field. Each path comes with its type, the operators the grammar takes on it
(`uda.query.filters.grammar.operator_allowed`, the grammar's own rule) and whether
`order_by` takes it (`uda.query.ordering.orderable_fields`).

`count_values` adds, for paths with at most `MAX_LISTED_VALUES` distinct values, those values
with their counts, read from the system of record and counted over what THE visibility rule
(`state_visible`) lets the caller see: a value only hidden elements hold is never listed, and
no count includes a hidden element. An own path counts the searchable elements holding each
value; a relation path counts the elements of its far end's types (the elements the path can
reach), whether or not an edge links them to anything yet.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from connectors.base import RelationalCapable, backend_name
from connectors.contract.predicates import Op, Scalar
from connectors.contract.records import SearchFilter
from connectors.contract.selection import Keyset, StateSelection
from ontology import Element, element_class, element_types, relation_spec, relation_types
from uda.errors import InvalidRequestError, UnknownFilterFieldError
from uda.query.clearance import Clearance, state_visible
from uda.query.deadlines import Guard
from uda.query.filters.fields import base_type, filterable_fields
from uda.query.filters.grammar import MAX_DEPTH, MAX_LEAVES, MAX_PATTERN, operator_allowed
from uda.query.ordering import DEFAULT_ORDER, orderable_fields

MAX_LISTED_VALUES = 20
"""A path whose visible values are at most this many distinct ones lists them, with counts."""
MAX_PREFIX = 200
SCAN_BATCH = 500
"""States read from the system of record per round trip while counting values."""

FieldType = Literal["string", "enum", "boolean", "integer", "number", "date", "datetime"]
Direction = Literal["out", "in"]

# One annotation per type: the grammar decides what each type takes (`operator_allowed`).
_REPRESENTATIVES: dict[FieldType, Any] = {
    "string": str,
    "enum": Op,  # any enumeration: the grammar treats them all alike
    "boolean": bool,
    "integer": int,
    "number": float,
    "date": date,
    "datetime": datetime,
}
_OPERATOR_MEANINGS: dict[Op, str] = {
    Op.EQ: "equal to the operand",
    Op.NE: "not equal (an element without the field matches)",
    Op.IN: "equal to one of a non-empty list",
    Op.NIN: "equal to none of a non-empty list (an element without the field matches)",
    Op.GT: "greater than",
    Op.GTE: "greater than or equal to",
    Op.LT: "less than",
    Op.LTE: "less than or equal to",
    Op.BETWEEN: "within [low, high], both included",
    Op.LIKE: "matches an SQL pattern (% any run, _ one character, \\ escapes), case-sensitive",
    Op.ILIKE: "matches an SQL pattern, ignoring case",
    Op.EXISTS: "true: the field has a value; false: it has none",
}


class PathValue(BaseModel):
    """One value a path holds, and how many visible elements hold it."""

    model_config = ConfigDict(frozen=True)

    value: str | int | float | bool
    count: int


class FilterPath(BaseModel):
    """A path `context_filters` may name, with what it takes.

    Attributes:
        values: the visible values with their counts, most frequent first, when there are
            at most `MAX_LISTED_VALUES` distinct ones; None when there are more
            (`many_values`) or when values were not asked for.
    """

    model_config = ConfigDict(frozen=True)

    path: str = Field(description='what a filter names: "status", "partOf.name", ...')
    field: str
    relation: str | None = Field(default=None, description="the relation a path crosses")
    direction: Direction | None = Field(
        default=None, description='"out": along the edge; "in": against it (a "~" path)'
    )
    type: FieldType
    operators: list[str] = Field(description="the operators the filter grammar takes here")
    orderable: bool = Field(description="whether order_by takes it (own fields only)")
    element_types: list[str] = Field(description="the element types whose value it reads")
    choices: list[str] | None = Field(default=None, description="the fixed values, if any")
    values: list[PathValue] | None = None
    many_values: bool = Field(
        default=False, description=f"more than {MAX_LISTED_VALUES} distinct visible values"
    )


class Operators(BaseModel):
    """The operators of the filter grammar: which each field type takes, what each means."""

    model_config = ConfigDict(frozen=True)

    types: dict[str, list[str]] = Field(description="field type -> the operators it takes")
    descriptions: dict[str, str] = Field(description="operator -> what it means")
    max_depth: int = Field(default=MAX_DEPTH, description="how deep filter objects may nest")
    max_comparisons: int = Field(default=MAX_LEAVES, description="comparisons in one tree")
    max_pattern: int = Field(default=MAX_PATTERN, description="characters in a pattern")


def field_type(annotation: Any) -> FieldType:
    """The type of a field, as discovery names it."""
    target = base_type(annotation)
    if isinstance(target, type) and issubclass(target, Enum):
        return "enum"
    found: dict[Any, FieldType] = {
        bool: "boolean",
        int: "integer",
        float: "number",
        date: "date",
        datetime: "datetime",
    }
    return found.get(target, "string")


def valid_operators(annotation: Any) -> list[str]:
    """The operators the grammar takes on a field of this annotation, in `Op` order."""
    return [op.value for op in Op if operator_allowed(op, annotation)]


def operators() -> Operators:
    """Which operators each field type takes (the grammar's rule), and what each means."""
    return Operators(
        types={kind: valid_operators(annotation) for kind, annotation in _REPRESENTATIVES.items()},
        descriptions={op.value: _OPERATOR_MEANINGS[op] for op in Op},
    )


def _classes(names: Iterable[str] | None = None) -> list[type[Element]]:
    """Registered classes that are (subclasses of) one of `names` (None: all)."""
    wanted = None if names is None else set(names)
    found: list[type[Element]] = []
    for name in element_types():
        cls = element_class(name)
        if cls is None:  # pragma: no cover - the registry and its names agree
            continue
        if wanted is None or any(base.__name__ in wanted for base in cls.__mro__):
            found.append(cls)
    return found


@dataclass(frozen=True, kw_only=True)
class _Known:
    """The registry's filterable fields and orderable keys, read once per listing."""

    fields: dict[str, Any]
    orderable: frozenset[str]


def _fields_of(classes: Sequence[type[Element]], known: _Known) -> dict[str, list[str]]:
    """Filterable field -> the element types (of `classes`) that hold it."""
    owners: dict[str, list[str]] = {}
    for cls in classes:
        for name in known.fields:
            if name == "element_type" or name in cls.model_fields:
                owners.setdefault(name, []).append(cls.type_name())
    return owners


def _path(
    name: str,
    owners: list[str],
    known: _Known,
    relation: str | None = None,
    direction: Direction | None = None,
) -> FilterPath:
    annotation = known.fields[name]
    choices: list[str] | None = None
    target = base_type(annotation)
    if name == "element_type":
        choices = sorted(owners)
    elif isinstance(target, type) and issubclass(target, Enum):
        choices = [str(member.value) for member in target]
    prefix = "" if relation is None else ("~" if direction == "in" else "") + relation + "."
    return FilterPath(
        path=prefix + name,
        field=name,
        relation=relation,
        direction=direction,
        type=field_type(annotation),
        operators=valid_operators(annotation),
        orderable=relation is None and name in known.orderable,
        element_types=sorted(owners),
        choices=choices,
    )


def all_paths() -> list[FilterPath]:
    """Every filterable path: own fields, then relation paths, each group sorted."""
    known = _Known(fields=filterable_fields(), orderable=frozenset(orderable_fields()))
    searchable = [cls for cls in _classes() if cls.knowledge_asset]
    searchable_names = {cls.type_name() for cls in searchable}
    out = [
        _path(name, owners, known) for name, owners in sorted(_fields_of(searchable, known).items())
    ]
    for relation in relation_types():
        spec = relation_spec(relation)
        if spec is None:  # pragma: no cover - the registry and its names agree
            continue
        ends: list[tuple[Direction, tuple[str, ...], tuple[str, ...]]] = [
            ("out", spec.sources, spec.targets),
            ("in", spec.targets, spec.sources),
        ]
        for direction, near, far in ends:
            if not searchable_names & {cls.type_name() for cls in _classes(near)}:
                continue  # no result can stand at the near end: the path never matches
            for name, owners in sorted(_fields_of(_classes(far), known).items()):
                out.append(_path(name, owners, known, relation, direction))
    return out


def check_prefix(prefix: object) -> str:
    """A path prefix as given (None: the empty prefix, every path).

    Raises:
        InvalidRequestError: naming `prefix`: not a string, or longer than `MAX_PREFIX`.
    """
    if prefix is None:
        return ""
    if not isinstance(prefix, str):
        raise InvalidRequestError(
            f"prefix: expected a string, got {type(prefix).__name__}", field="prefix", value=prefix
        )
    if len(prefix) > MAX_PREFIX:
        raise InvalidRequestError(
            f"prefix: at most {MAX_PREFIX} characters (got {len(prefix)})",
            field="prefix",
            value=prefix[:40],
        )
    return prefix


def filter_paths(prefix: str | None = None) -> list[FilterPath]:
    """The paths starting with `prefix` (None or "": all); an unknown prefix lists none.

    Raises:
        InvalidRequestError: naming `prefix`, when it is not a string or too long.
    """
    start = check_prefix(prefix)
    return [p for p in all_paths() if p.path.startswith(start)]


def find_path(path: str, field: str = "path") -> FilterPath:
    """One path by its exact name.

    Raises:
        UnknownFilterFieldError: naming `field`, with the nearest path.
    """
    paths = {p.path: p for p in all_paths()}
    found = paths.get(path)
    if found is None:
        close = difflib.get_close_matches(path, list(paths), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UnknownFilterFieldError(
            f"{field}: no filterable path named {path!r}{hint}; list them with "
            "discover_filter_paths (or GET /v1/paths, `uda fields`)",
            field=field,
            value=path,
        )
    return found


def _shown(value: Scalar, annotation: Any) -> str | int | float | bool:
    """A stored (normalised) value as a caller writes it in a filter."""
    target = base_type(annotation)
    if target is datetime and isinstance(value, int) and not isinstance(value, bool):
        moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=value)
        return moment.isoformat().replace("+00:00", "Z")
    if target is date and isinstance(value, int) and not isinstance(value, bool):
        return (date(1970, 1, 1) + timedelta(days=value)).isoformat()
    return value


async def count_values(
    system_of_record: RelationalCapable,
    clearance: Clearance,
    paths: Sequence[FilterPath],
    guard: Guard | None = None,
) -> list[FilterPath]:
    """`paths` with their visible values and counts (see the module's docstring).

    One scan of the current states the paths can read, in keyset batches; every state is
    checked with `state_visible` before any of its values is counted. The scan stops early
    once every path has more than `MAX_LISTED_VALUES` distinct values. With `guard`, each
    batch is read within its deadlines (without the store: `BackendUnavailableError`).
    """
    name = backend_name(system_of_record)
    readers: dict[str, list[FilterPath]] = {}  # element type -> the paths reading it
    for path in paths:
        for type_name in path.element_types:
            readers.setdefault(type_name, []).append(path)
    if not readers:
        return list(paths)
    counts: dict[str, Counter[tuple[bool, Scalar]]] = {p.path: Counter() for p in paths}
    many: set[str] = set()
    search_filter = SearchFilter(
        max_sensitivity_rank=clearance.level.rank,
        projects=tuple(sorted(clearance.projects)),
        all_projects=clearance.all_projects,
        element_types=tuple(sorted(readers)),
    )
    after: Keyset | None = None
    while len(many) < len(counts):
        selection = StateSelection(
            search_filter=search_filter, order=DEFAULT_ORDER, limit=SCAN_BATCH, after=after
        )
        read = lambda selection=selection: system_of_record.select_states(selection)  # noqa: E731
        rows = await (read() if guard is None else guard.required(name, read))
        for state in rows:
            if not state_visible(clearance, state):
                continue
            for path in readers.get(state.element_type, ()):
                if path.path in many:
                    continue
                if path.field == "element_type":
                    value: Scalar | None = state.element_type
                else:
                    value = state.filter_values.get(path.field)
                if value is None:
                    continue
                counter = counts[path.path]
                counter[(isinstance(value, bool), value)] += 1
                if len(counter) > MAX_LISTED_VALUES:
                    many.add(path.path)
                    counter.clear()
        if len(rows) < SCAN_BATCH:
            break
        after = Keyset.of(DEFAULT_ORDER, rows[-1])
    known = filterable_fields()
    out: list[FilterPath] = []
    for path in paths:
        if path.path in many:
            out.append(path.model_copy(update={"values": None, "many_values": True}))
            continue
        annotation = known[path.field]
        ordered = sorted(counts[path.path].items(), key=lambda item: (-item[1], str(item[0][1])))
        values = [PathValue(value=_shown(v, annotation), count=n) for (_, v), n in ordered]
        out.append(path.model_copy(update={"values": values}))
    return out


async def describe_paths(
    system_of_record: RelationalCapable,
    clearance_scope: Iterable[str] | None,
    prefix: str | None = None,
    *,
    values: bool = True,
    guard: Guard | None = None,
) -> list[FilterPath]:
    """The paths starting with `prefix`, with the values `clearance_scope` may see (`values`).

    No clearance means `public` only, as for a search.

    Raises:
        InvalidRequestError: naming `prefix`, when it is not a string or too long.
        UnknownClearanceError: naming `clearance_scope`, for a bad entry.
    """
    if isinstance(clearance_scope, str):
        raise InvalidRequestError(
            "clearance_scope: a list of entries, not one string",
            field="clearance_scope",
            value=clearance_scope,
        )
    clearance = Clearance.parse(clearance_scope or ())
    paths = filter_paths(prefix)
    if not values or not paths:
        return paths
    return await count_values(system_of_record, clearance, paths, guard)


__all__ = [
    "MAX_LISTED_VALUES",
    "FilterPath",
    "Operators",
    "PathValue",
    "all_paths",
    "count_values",
    "describe_paths",
    "field_type",
    "filter_paths",
    "find_path",
    "operators",
    "valid_operators",
]
