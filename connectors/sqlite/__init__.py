"""SQLite, the embedded profile's system of record and lexical leg.

`connector` is the RelationalCapable and TextCapable connector; `schema` its tables and
statements, `lexical` the BM25 leg's methods (a mixin of the connector) and `text` their
statements, `connections` the writer and per-thread readers it shares with the Chroma chunk
directory.

The connector classes load on first use, so that importing a helper module of this package
does not import the backend's library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from connectors.lazy import lazy_exports

if TYPE_CHECKING:
    from connectors.sqlite.connector import SQLiteConnector

__all__ = [
    "SQLiteConnector",
]

__getattr__ = lazy_exports(__name__, "connectors.sqlite.connector", __all__)
