"""Saved queries as the system of record keeps them (issue 16, docs/adr/0023).

Every search is kept under its `query_id`, so that its pages can be asked for again after a
restart and from any client of the store. The store keeps opaque values; the planner
(`uda.query.saved`) decides what they mean.
"""

from __future__ import annotations

from dataclasses import dataclass

SAVED_QUERY_COLUMNS = ("query_id", "owner", "created_ms", "body", "embedding")
"""The `saved_queries` table, in row order (`SavedQueryRow`'s fields)."""


@dataclass(frozen=True, kw_only=True)
class SavedQueryRow:
    """One saved query.

    Attributes:
        query_id: random and unguessable; the key.
        owner: who asked (a principal's name over HTTP; None for a local client).
        created_ms: wall clock when it was asked (for retention).
        body: the request and what the first page pinned, as JSON text.
        embedding: the query vector as little-endian float32 bytes (None: no query text).
    """

    query_id: str
    owner: str | None
    created_ms: int
    body: str
    embedding: bytes | None = None


__all__ = ["SAVED_QUERY_COLUMNS", "SavedQueryRow"]
