"""Value conversion and checks for the PostgreSQL connector (no I/O).

PostgreSQL cannot store NUL characters or lone surrogates in text; a batch holding one is
refused as a whole, before anything is written, with an error naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from connectors.contract.errors import UserError
from connectors.contract.records import ChunkRecord, GraphEdge
from connectors.contract.system_of_record import WriteBatch
from connectors.postgres import filter_sql


def vector(values: Sequence[float]) -> np.ndarray[Any, np.dtype[np.float32]]:
    """A float32 array, the form pgvector's adapter sends."""
    return np.asarray(values, dtype=np.float32)


def edge(row: Sequence[Any]) -> GraphEdge:
    """An edge from a `(source, relation, target, valid_from, valid_to)` row."""
    return GraphEdge(
        source_id=row[0], relation=row[1], target_id=row[2], valid_from=row[3], valid_to=row[4]
    )


def storable(ids: Sequence[str]) -> list[str]:
    """The distinct ids PostgreSQL could hold: no stored row has any of the others."""
    return list(dict.fromkeys(i for i in ids if filter_sql.storable(i)))


def last_per_id(chunks: Sequence[ChunkRecord]) -> list[ChunkRecord]:
    """One record per chunk id (the last wins): one statement cannot upsert a row twice."""
    return list({c.chunk_id: c for c in chunks}.values())


def _unstorable(value: object) -> bool:
    if isinstance(value, str):
        return not filter_sql.storable(value)
    if isinstance(value, Mapping):
        return any(_unstorable(k) or _unstorable(v) for k, v in value.items())  # type: ignore[misc]
    if isinstance(value, list | tuple):
        return any(_unstorable(v) for v in value)  # type: ignore[misc]
    return False


def _refuse(element_id: str, field: str, value: object) -> None:
    raise UserError(
        f"{field} of {element_id!r} holds a NUL character or a lone surrogate, which "
        "PostgreSQL cannot store",
        field=field,
        value=value,
    )


def reject_unstorable(batch: WriteBatch) -> None:
    """Refuse the whole batch, before any write, if PostgreSQL could not store a value."""
    for s in batch.states:
        for field, value in (
            ("element_id", s.element_id),
            ("element_type", s.element_type),
            ("name", s.name),
            ("scope", s.scope),
            ("payload", s.payload),
            ("filter_values", s.filter_values),
        ):
            if _unstorable(value):
                _refuse(s.element_id, field, value)
    for c in batch.chunks:
        if _unstorable(c.element_id) or _unstorable(c.text):
            _refuse(c.element_id, "text", c.text)
    for e in batch.edges:
        if _unstorable(list(e.key)):
            _refuse(e.source_id, "relation", list(e.key))


def reject_unstorable_chunks(chunks: Sequence[ChunkRecord]) -> None:
    """Refuse chunks for the vector or text store that PostgreSQL could not hold."""
    for c in chunks:
        for field, value in (
            ("chunk_id", c.chunk_id),
            ("text", c.text),
            ("name", c.name),
            ("scope", c.scope),
            ("filter_values", c.filter_values),
        ):
            if _unstorable(value):
                _refuse(c.element_id, field, value)
