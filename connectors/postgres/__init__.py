"""PostgreSQL with pgvector, the server profile's system of record, vector and lexical legs.

`connector` assembles the legs: `store` (pool and schema), `vector` (pgvector HNSW),
`lexical` and `text` (BM25 over the shared analyzer), `tables` (the schema script),
`record_sql` (the system of record's statements), `filter_sql` (the pushdown filter) and
`values` (row and parameter conversions).

The connector classes load on first use, so that importing a helper module of this package
does not import the backend's library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from connectors.lazy import lazy_exports

if TYPE_CHECKING:
    from connectors.postgres.connector import PostgresConnector

__all__ = [
    "PostgresConnector",
]

__getattr__ = lazy_exports(__name__, "connectors.postgres.connector", __all__)
