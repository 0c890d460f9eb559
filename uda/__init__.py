"""UDA, the Universal Data Adapter: one typed, clearance-aware search over many backends.

    import uda
    client = uda.connect(path="some/dir")
    client.ingest(elements=[...], relations=[...])
    res = client.search("query", limit=5, clearance_scope=["internal"])

The clients and results load lazily: `import uda` takes about 0.1 s, the clients with their
backends' libraries about 0.3 s more, which a command that only prints its `--help` or an
error should not pay.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from uda.errors import (
    BackendUnavailableError,
    ClockSkewError,
    ConfigError,
    ConnectorError,
    InvalidElementError,
    InvalidRequestError,
    MissingCapabilityError,
    MissingElementError,
    PlanError,
    StoresBehindError,
    UDAError,
    UnknownClearanceError,
    UnknownConnectorError,
    UnknownElementTypeError,
    UnknownFilterFieldError,
    UnknownRelationError,
    UserError,
)
from uda.query.contracts import SearchRequest, SearchResult

if TYPE_CHECKING:
    from uda.client import Client, aconnect, connect
    from uda.client.async_client import AsyncClient
    from uda.query.explanation import Explanation
    from uda.query.results import SearchResponse
    from uda.write.consistency import ConsistencyReport, RepairReport
    from uda.write.writer import IngestReport

__version__ = "0.1.0"

_LAZY = {
    "AsyncClient": "uda.client.async_client",
    "Client": "uda.client",
    "aconnect": "uda.client",
    "connect": "uda.client",
    "ConsistencyReport": "uda.write.consistency",
    "RepairReport": "uda.write.consistency",
    "Explanation": "uda.query.explanation",
    "SearchResponse": "uda.query.results",
    "IngestReport": "uda.write.writer",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'uda' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "AsyncClient",
    "BackendUnavailableError",
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
    "StoresBehindError",
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
