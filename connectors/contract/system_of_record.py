"""Values exchanged with the system of record (RelationalCapable)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from connectors.contract.predicates import Scalar
from connectors.contract.records import OPEN, ChunkRecord, GraphEdge

# -- the rows the stores keep ----------------------------------------------------------
# Every connector spells its statements from these column lists, and the `*_from_row` and
# `*_values` functions below read and write rows in their order, so that a statement and the
# code that reads its rows cannot drift apart.

STATE_COLUMNS = (
    "element_id",
    "version",
    "hlc",
    "valid_to",
    "element_type",
    "name",
    "sensitivity_rank",
    "scope",
    "timestamp_ms",
    "tombstone",
    "content_hash",
    "payload",
    "filter_values",
)
"""The `states` table: `StoredState`'s stored fields, of the same names, in row order."""
HEAD_COLUMNS = (
    "element_id",
    "version",
    "hlc",
    "element_type",
    "name",
    "sensitivity_rank",
    "scope",
    "timestamp_ms",
    "tombstone",
    "filter_values",
)
"""What ranking reads of a state: everything but its payload (`StateHead`'s fields).

Clearance, type, name, time and filter values: what phase 3 needs to decide which
candidates a caller may see and how they rank, read from a covering index, without the
payloads that make the rows wide (ADR 51). The name tells which graph nodes a query names
(`uda.query.entities`).
"""
LATEST_COLUMNS = ("sensitivity_rank", "scope")
"""What a state query adds of the element's newest state (the `latest_*` fields)."""
JSON_COLUMNS = frozenset(("payload", "filter_values"))
"""The columns that hold JSON objects."""
CHUNK_COLUMNS = ("chunk_id", "element_id", "version", "idx", "text", "embedding")
"""The `chunks` table: a `ChunkRow` (`idx` is its `index`), in row order."""
CHUNK_STATE_COLUMNS = (
    "element_type",
    "name",
    "sensitivity_rank",
    "scope",
    "hlc",
    "valid_to",
    "filter_values",
)
"""What a `ChunkRecord` takes from its state's row (`hlc` is its `valid_from`)."""
LOADED_CHUNK_COLUMNS = (
    *(f"c.{column}" for column in CHUNK_COLUMNS if column != "chunk_id"),
    *(f"s.{column}" for column in CHUNK_STATE_COLUMNS),
)
"""The row `load_chunks` reads: a chunk (alias `c`) joined to its state (alias `s`)."""
LOADED_CHUNK_COLUMNS_WITHOUT_EMBEDDING = tuple(
    "NULL" if column == "c.embedding" else column for column in LOADED_CHUNK_COLUMNS
)
"""The same row for a store that keeps no vectors: the embedding is neither read nor decoded."""
DERIVED_CHUNK_COLUMNS = (
    "chunk_id",
    "element_id",
    "version",
    "element_type",
    "sensitivity_rank",
    "scope",
    "valid_from",
    "valid_to",
    "filter_values",
)
"""What every derived chunk store keeps of a `ChunkRecord` to filter on it, in row order.

The fields of the same names; the pushdown filters (`compile_filter`) read these columns.
"""


def _values(
    item: object, names: Iterable[str], write: Mapping[str, Callable[[Any], object]]
) -> tuple[Any, ...]:
    """`item`'s fields `names` as a row; `write` converts the named fields' values (not None)."""
    row: list[Any] = []
    for name in names:
        value = getattr(item, name)
        convert = write.get(name)
        row.append(value if convert is None or value is None else convert(value))
    return tuple(row)


def _json(json_value: Callable[[dict[str, Any]], object]) -> Callable[[Any], object]:
    """A JSON column's writer: the mapping copied to a dict, then `json_value`."""
    return lambda mapping: json_value(dict(mapping))


def column_list(columns: Iterable[str], alias: str = "", *, json_as: str = "{}") -> str:
    """`columns` for a statement, each prefixed `alias.` if given.

    `json_as` is the expression that reads a JSON column (`{}` stands for the column).
    """
    prefix = f"{alias}." if alias else ""
    return ", ".join(
        (json_as if column in JSON_COLUMNS else "{}").format(prefix + column) for column in columns
    )


def insert_sql(table: str, columns: Sequence[str], mark: str, *, verb: str = "INSERT") -> str:
    """`verb INTO table (columns) VALUES (...)`, a parameter `mark` (`?`, `%s`) per column."""
    values = ", ".join([mark] * len(columns))
    return f"{verb} INTO {table} ({column_list(columns)}) VALUES ({values})"


def conflict_update(key: str, columns: Sequence[str]) -> str:
    """`ON CONFLICT (key)`: every other of `columns` takes the value just inserted."""
    updates = ", ".join(f"{column} = excluded.{column}" for column in columns if column != key)
    return f"ON CONFLICT ({key}) DO UPDATE SET {updates}"


class LazyJSON(Mapping[str, Any]):
    """A JSON object that is parsed on first use.

    A search fetches the state of every candidate and context node (hundreds) but hydrates
    only the few it returns; parsing every payload up front was most of phase 3's fetch.
    """

    __slots__ = ("_parsed", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._parsed: dict[str, Any] | None = None

    @property
    def text(self) -> str:
        """The JSON text as stored (identical text, identical object)."""
        return self._text

    def _value(self) -> dict[str, Any]:
        parsed = self._parsed
        if parsed is None:
            parsed = self._parsed = json.loads(self._text)
        return parsed

    def __getitem__(self, key: str) -> Any:
        return self._value()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._value())

    def __len__(self) -> int:
        return len(self._value())

    def __repr__(self) -> str:
        return repr(self._value())


@dataclass(frozen=True, kw_only=True)
class StoredState:
    """One state of one element, as the system of record keeps it.

    `payload` is the element's full JSON dump (the typed object is rebuilt from it);
    `filter_values` are its normalised filterable fields; those that are also columns
    (`selection.FIELD_COLUMNS`: element_id, element_type, name, timestamp), when present,
    equal their column, so a store may read a predicate on them from the column. The
    `latest_*` fields describe the newest state of the element (they equal this state's when
    it is the newest).
    """

    element_id: str
    version: int
    hlc: int
    element_type: str
    name: str
    sensitivity_rank: int
    scope: str | None
    timestamp_ms: int
    tombstone: bool
    content_hash: str
    payload: Mapping[str, Any]
    filter_values: Mapping[str, Scalar]
    valid_to: int = OPEN
    latest_sensitivity_rank: int = 0
    latest_scope: str | None = None


def _latest(columns: Iterable[str]) -> tuple[str, ...]:
    """The fields of a state query's row: `columns`, then the newest state's clearance."""
    return (*columns, *(f"latest_{column}" for column in LATEST_COLUMNS))


_STATE_FIELDS = _latest(STATE_COLUMNS)


def state_from_row(row: Sequence[Any]) -> StoredState:
    """A state from a row of the stores' state queries: `STATE_COLUMNS`, `LATEST_COLUMNS`.

    Payload and filter values come as JSON text, parsed when first used.
    """
    # The frozen dataclass's __init__ sets each field through object.__setattr__; a search
    # builds hundreds of states, and that was half their cost. Filling the instance dict
    # gives the same object (tests/test_write_path.py holds it equal to the constructor's).
    # Positions are spelled out (a zip over the column names cost 50 % more per row, which a
    # search pays hundreds of times); `_check_reader` holds them to `_STATE_FIELDS` at import.
    state = _new_state(StoredState)
    state.__dict__.update(
        element_id=row[0],
        version=row[1],
        hlc=row[2],
        valid_to=row[3],
        element_type=row[4],
        name=row[5],
        sensitivity_rank=row[6],
        scope=row[7],
        timestamp_ms=row[8],
        tombstone=bool(row[9]),
        content_hash=row[10],
        payload=LazyJSON(row[11]),
        filter_values=LazyJSON(row[12]),
        latest_sensitivity_rank=row[13],
        latest_scope=row[14],
    )
    return state


_new_state = object.__new__


def state_values(
    state: StoredState, json_value: Callable[[dict[str, Any]], object]
) -> tuple[Any, ...]:
    """A state as a row of `STATE_COLUMNS`, its JSON columns written by `json_value`."""
    return _values(state, STATE_COLUMNS, dict.fromkeys(JSON_COLUMNS, _json(json_value)))


class UnreadValues(Mapping[str, Any]):
    """The filter values of a head read without them (`fetch_heads(filter_values=False)`).

    A search whose filter has no value predicate does not need them, and they were a third
    of what a head read moved. Any use of these is a bug, and raises instead of answering
    as if the element had no values.
    """

    __slots__ = ()

    def _unread(self) -> LookupError:
        return LookupError("this head was read without its filter values")

    def __getitem__(self, key: str) -> Any:
        raise self._unread()

    def __iter__(self) -> Iterator[str]:
        raise self._unread()

    def __len__(self) -> int:
        raise self._unread()

    def __repr__(self) -> str:
        return "UNREAD"


UNREAD = UnreadValues()


@dataclass(frozen=True, kw_only=True)
class StateHead:
    """A state without its payload: what clearance and ranking read (ADR 51).

    Phase 3 reads heads of every candidate and every node the expansion reached (hundreds
    per search), ranks on them, and reads whole states (`fetch_versions`) only for the page
    it returns and its context nodes. The fields mean what `StoredState`'s of the same names
    mean.
    """

    element_id: str
    version: int
    hlc: int
    element_type: str
    name: str  # the element's name in this state (what a query may name it by)
    sensitivity_rank: int
    scope: str | None
    timestamp_ms: int
    tombstone: bool
    filter_values: Mapping[str, Scalar]
    latest_sensitivity_rank: int
    latest_scope: str | None

    @classmethod
    def of(cls, state: StoredState) -> StateHead:
        """The head of a whole state."""
        return cls(
            element_id=state.element_id,
            version=state.version,
            hlc=state.hlc,
            element_type=state.element_type,
            name=state.name,
            sensitivity_rank=state.sensitivity_rank,
            scope=state.scope,
            timestamp_ms=state.timestamp_ms,
            tombstone=state.tombstone,
            filter_values=state.filter_values,
            latest_sensitivity_rank=state.latest_sensitivity_rank,
            latest_scope=state.latest_scope,
        )


_HEAD_FIELDS = _latest(HEAD_COLUMNS)


def head_from_row(row: Sequence[Any]) -> StateHead:
    """A head from a row of the head queries: `HEAD_COLUMNS`, then `LATEST_COLUMNS`.

    Filter values selected as NULL (a read without them) become `UNREAD`.
    """
    # Spelled out and filled through the instance dict, as `state_from_row`: phase 3 reads
    # hundreds of these per search, and the frozen __init__ cost 5.7 us each of the 7 here.
    head = _new_state(StateHead)
    head.__dict__.update(
        element_id=row[0],
        version=row[1],
        hlc=row[2],
        element_type=row[3],
        name=row[4],
        sensitivity_rank=row[5],
        scope=row[6],
        timestamp_ms=row[7],
        tombstone=bool(row[8]),
        filter_values=UNREAD if row[9] is None else LazyJSON(row[9]),
        latest_sensitivity_rank=row[10],
        latest_scope=row[11],
    )
    return head


def _check_reader(reader: Callable[[Sequence[Any]], object], fields: Sequence[str]) -> None:
    """Fail at import unless `reader` puts each column of `fields` into the field it names.

    A row of distinct sample values goes in; each field must come out holding its column's
    value (a tombstone flag as a bool, JSON text parsed), so the column tuples stay the one
    definition of the row and the spelled-out readers cannot drift from them.
    """
    sample = [
        1 if name == "tombstone" else json.dumps({"column": name}) if name in JSON_COLUMNS else name
        for name in fields
    ]
    built = reader(sample)
    for name, given in zip(fields, sample, strict=True):
        got = getattr(built, name)
        expected: object = given
        if name == "tombstone":
            expected = True
        elif name in JSON_COLUMNS:
            got, expected = dict(got), {"column": name}
        if got != expected:
            raise TypeError(f"{reader.__name__} reads column {name!r} into the wrong field")


# A state row fills a `StoredState` field by field: its columns must be the fields.
if set(_STATE_FIELDS) != {f.name for f in fields(StoredState)}:
    raise TypeError("STATE_COLUMNS and LATEST_COLUMNS must name StoredState's fields")
_check_reader(state_from_row, _STATE_FIELDS)
_check_reader(head_from_row, _HEAD_FIELDS)
if set(_HEAD_FIELDS) != {f.name for f in fields(StateHead)}:
    raise TypeError("HEAD_COLUMNS and LATEST_COLUMNS must name StateHead's fields")


@dataclass(frozen=True, kw_only=True)
class ChunkRow:
    """A chunk of a new state, with its embedding.

    The embedding is kept so that derived stores can be rebuilt without re-embedding.
    """

    element_id: str
    version: int
    index: int
    text: str
    embedding: Sequence[float] | None

    @property
    def chunk_id(self) -> str:
        """Stable id: element, version, position."""
        return chunk_id(self.element_id, self.version, self.index)


def _chunk_fields(columns: Iterable[str]) -> tuple[str, ...]:
    """The `ChunkRow` or `ChunkRecord` fields that chunk columns (aliased or not) hold."""
    renamed = {"idx": "index", "hlc": "valid_from"}
    names = (column.rpartition(".")[2] for column in columns)
    return tuple(renamed.get(name, name) for name in names)


_CHUNK_FIELDS = _chunk_fields(CHUNK_COLUMNS)
_LOADED_CHUNK_FIELDS = _chunk_fields(LOADED_CHUNK_COLUMNS)


def chunk_values(
    chunk: ChunkRow, embedding: Callable[[Sequence[float]], object]
) -> tuple[Any, ...]:
    """A chunk as a row of `CHUNK_COLUMNS`, a present embedding written by `embedding`."""
    return _values(chunk, _CHUNK_FIELDS, {"embedding": embedding})


def chunk_record_from_row(
    row: Sequence[Any],
    *,
    embedding: Callable[[Any], Sequence[float]],
    filter_values: Callable[[Any], Mapping[str, Scalar]],
) -> ChunkRecord:
    """A chunk with its state's metadata from a row of `LOADED_CHUNK_COLUMNS`.

    `embedding` reads a stored embedding (NULL stays None), `filter_values` the stored JSON.
    """
    values = dict(zip(_LOADED_CHUNK_FIELDS, row, strict=True))
    stored = values["embedding"]
    values["embedding"] = None if stored is None else embedding(stored)
    values["filter_values"] = filter_values(values["filter_values"])
    return ChunkRecord(
        chunk_id=chunk_id(values["element_id"], values["version"], values["index"]), **values
    )


def derived_chunk_values(
    chunk: ChunkRecord, json_value: Callable[[dict[str, Scalar]], object]
) -> tuple[Any, ...]:
    """A chunk as a row of `DERIVED_CHUNK_COLUMNS`, its filter values written by `json_value`."""
    return _values(chunk, DERIVED_CHUNK_COLUMNS, {"filter_values": _json(json_value)})


def chunk_id(element_id: str, version: int, index: int) -> str:
    """The id of chunk `index` of state `version` of an element."""
    return f"{element_id}@{version}#{index}"


def state_key(chunk: str) -> tuple[str, int]:
    """The `(element_id, version)` of the state a chunk id belongs to.

    Split at the last `@`: element ids may hold `@` and `#`, version and index cannot.
    """
    element_id, _, rest = chunk.rpartition("@")
    return element_id, int(rest.partition("#")[0])


@dataclass(frozen=True, kw_only=True)
class WriteBatch:
    """Everything one ingest writes, committed atomically by the system of record.

    `retire` closes superseded states: `(element_id, version, valid_to)`. `edges` are
    upserted by key (new edges, and existing ones closed by a delete). `stores` names the
    derived stores that get an outbox entry per state and edge touched.
    """

    states: Sequence[StoredState] = ()
    chunks: Sequence[ChunkRow] = ()
    retire: Sequence[tuple[str, int, int]] = ()
    edges: Sequence[GraphEdge] = ()
    stores: Sequence[str] = ()
    hlc: int = 0


@dataclass(frozen=True, kw_only=True)
class OutboxItem:
    """A state or an edge that a derived store has not applied yet."""

    seq: int
    store: str
    kind: Literal["state", "edge"]
    key: tuple[str, ...] = field(default_factory=tuple[str, ...])
