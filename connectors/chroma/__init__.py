"""Chroma, the embedded profile's vector store (`PersistentClient`, or `HttpClient` to a server).

`connector` is the VectorCapable connector; `directory` the chunk directory in SQLite
beside the collection, which answers filtered searches (ADR 16).

The connector classes load on first use, so that importing a helper module of this package
does not import the backend's library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from connectors.lazy import lazy_exports

if TYPE_CHECKING:
    from connectors.chroma.connector import ChromaConnector

__all__ = [
    "ChromaConnector",
]

__getattr__ = lazy_exports(__name__, "connectors.chroma.connector", __all__)
