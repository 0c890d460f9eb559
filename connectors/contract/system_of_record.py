"""Values exchanged with the system of record (RelationalCapable)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from connectors.contract.predicates import Scalar
from connectors.contract.records import OPEN, GraphEdge


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
    `filter_values` are its normalised filterable fields. The `latest_*` fields describe the
    newest state of the element (they equal this state's when it is the newest).
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


def state_from_row(row: Sequence[Any]) -> StoredState:
    """A state from a row of the stores' state queries, in `StoredState`'s field order.

    Columns: element id, version, hlc, valid_to, type, name, sensitivity, scope, timestamp,
    tombstone, content hash, payload and filter values (JSON text, parsed when first used),
    newest sensitivity, newest scope.
    """
    # The frozen dataclass's __init__ sets each field through object.__setattr__; a search
    # builds hundreds of states, and that was half their cost. Filling the instance dict
    # gives the same object (tests/test_write_path.py holds it equal to the constructor's).
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


@dataclass(frozen=True, kw_only=True, slots=True)
class StateClearance:
    """What clearance needs of a state, without its payload.

    Phase 3 reads this for the nodes that can only be context (hundreds per search), and
    whole states for the rest. The fields mean what `StoredState`'s of the same names mean.
    """

    element_id: str
    version: int
    sensitivity_rank: int
    scope: str | None
    tombstone: bool
    latest_sensitivity_rank: int
    latest_scope: str | None

    @classmethod
    def of(cls, state: StoredState) -> StateClearance:
        """The clearance part of a whole state."""
        return cls(
            element_id=state.element_id,
            version=state.version,
            sensitivity_rank=state.sensitivity_rank,
            scope=state.scope,
            tombstone=state.tombstone,
            latest_sensitivity_rank=state.latest_sensitivity_rank,
            latest_scope=state.latest_scope,
        )


def clearance_from_row(row: Sequence[Any]) -> StateClearance:
    """A clearance from a row of the stores' clearance queries, in the fields' order."""
    return StateClearance(
        element_id=row[0],
        version=row[1],
        sensitivity_rank=row[2],
        scope=row[3],
        tombstone=bool(row[4]),
        latest_sensitivity_rank=row[5],
        latest_scope=row[6],
    )


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
