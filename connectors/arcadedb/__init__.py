"""ArcadeDB, the server profile's graph store (embedded in process or over HTTP).

`connector` holds the connectors, `backends` the embedded and HTTP transports, `queries`
the Cypher and SQL they run.
The connector classes load on first use, so that importing a helper module of this package
does not import the backend's library.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from connectors.arcadedb.connector import ArcadeDBConnector, ArcadeDBGraphConnector

__all__ = [
    "ArcadeDBConnector",
    "ArcadeDBGraphConnector",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("connectors.arcadedb.connector"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
