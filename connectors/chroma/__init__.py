"""Chroma, the embedded profile's vector store (`PersistentClient`, or `HttpClient` to a server).

`connector` is the VectorCapable connector; `directory` the chunk directory in SQLite
beside the collection, which answers filtered searches (ADR 16).
The connector classes load on first use, so that importing a helper module of this package
does not import the backend's library.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from connectors.chroma.connector import ChromaConnector

__all__ = [
    "ChromaConnector",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("connectors.chroma.connector"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
