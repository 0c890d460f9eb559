"""ArcadeDB, the server profile's graph store (embedded in process or over HTTP).

`connector` holds the connectors, `backends` the embedded and HTTP transports, `queries`
the Cypher and SQL they run.

The connector classes load on first use, so that importing a helper module of this package
does not import the backend's library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from connectors.lazy import lazy_exports

if TYPE_CHECKING:
    from connectors.arcadedb.connector import ArcadeDBConnector, ArcadeDBGraphConnector

__all__ = [
    "ArcadeDBConnector",
    "ArcadeDBGraphConnector",
]

__getattr__ = lazy_exports(__name__, "connectors.arcadedb.connector", __all__)
