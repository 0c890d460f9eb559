"""UDA, the Universal Data Adapter: one typed, clearance-aware search over many backends.

    import uda
    client = uda.connect(path="some/dir")
    client.ingest(elements=[...], relations=[...])
    res = client.search("query", limit=5, clearance_scope=["internal"])

The clients and results load lazily, so that `connectors` can import `uda.filters` and
`uda.errors` without importing the whole package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from uda.contracts import SearchRequest, SearchResult
from uda.errors import (
    ClockSkewError,
    ConfigError,
    ConnectorError,
    InvalidElementError,
    InvalidRequestError,
    MissingCapabilityError,
    MissingElementError,
    PlanError,
    UDAError,
    UnknownClearanceError,
    UnknownConnectorError,
    UnknownElementTypeError,
    UnknownFilterFieldError,
    UnknownRelationError,
    UserError,
)

if TYPE_CHECKING:
    from uda.client import AsyncClient, Client, aconnect, connect
    from uda.consistency import ConsistencyReport, RepairReport
    from uda.explanation import Explanation
    from uda.results import SearchResponse
    from uda.writer import IngestReport

__version__ = "0.1.0"

_LAZY = {
    "AsyncClient": "uda.client",
    "Client": "uda.client",
    "aconnect": "uda.client",
    "connect": "uda.client",
    "ConsistencyReport": "uda.consistency",
    "RepairReport": "uda.consistency",
    "Explanation": "uda.explanation",
    "SearchResponse": "uda.results",
    "IngestReport": "uda.writer",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'uda' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "AsyncClient",
    "Client",
    "ClockSkewError",
    "ConfigError",
    "ConnectorError",
    "ConsistencyReport",
    "Explanation",
    "IngestReport",
    "InvalidElementError",
    "InvalidRequestError",
    "MissingCapabilityError",
    "MissingElementError",
    "PlanError",
    "RepairReport",
    "SearchRequest",
    "SearchResponse",
    "SearchResult",
    "UDAError",
    "UnknownClearanceError",
    "UnknownConnectorError",
    "UnknownElementTypeError",
    "UnknownFilterFieldError",
    "UnknownRelationError",
    "UserError",
    "__version__",
    "aconnect",
    "connect",
]
