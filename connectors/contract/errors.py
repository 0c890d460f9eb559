"""The error tree: the caller's mistakes, backend failures, and planner faults.

`UserError` and its subclasses name the offending field and value, map to HTTP 4xx, and are
never wrapped backend messages. `ConnectorError` means a backend failed (HTTP 502);
`PlanError` means UDA itself could not run a phase (HTTP 500).
"""

from __future__ import annotations

from typing import Any


class UDAError(Exception):
    """Base of every error UDA raises on purpose."""


class UserError(UDAError, ValueError):
    """The request or the data is wrong; the message says which field and how to fix it."""

    def __init__(self, message: str, *, field: str | None = None, value: Any = None) -> None:
        super().__init__(message)
        self.field = field
        self.value = value


class InvalidRequestError(UserError):
    """A search request field is out of its bounds or malformed."""


class InvalidAggregateError(InvalidRequestError):
    """An aggregate's group key, time or metric names no field it can use (with a suggestion)."""


class UnknownClearanceError(UserError):
    """A clearance entry is neither a sensitivity level nor `project:<name>` / `project:*`."""


class UnknownFilterFieldError(UserError):
    """A context filter names a field no element type declares, or uses an unknown operator."""


class UnknownElementTypeError(UserError):
    """An element type that is not registered in the ontology."""


class UnknownRelationError(UserError):
    """A relation type that is not registered, or that does not fit its endpoints' types."""


class InvalidElementError(UserError):
    """An element or relation fails validation against its class."""


class MissingElementError(UserError):
    """A relation points at an element that neither the batch nor the store holds."""


class UnknownConnectorError(UserError):
    """A connector name that no registry entry or entry point provides."""


class QueryNotFoundError(UserError):
    """No saved query with this id that the caller made (HTTP 404, like a missing one)."""


class MissingCapabilityError(UserError):
    """The profile lacks a connector with a capability the request needs."""


class NothingToTuneError(UserError):
    """`uda tune` found too little graph to build its pseudo-queries from (nothing recorded)."""


class ConfigError(UserError):
    """A profile or configuration file is malformed."""


class EmbeddingModelMismatchError(ConfigError):
    """The store's vectors were made by another embedding model than the client's.

    Vectors of two models cannot be compared: a search would rank nonsense and a write
    would mix them. Names both fingerprints and the ways out.
    """

    def __init__(self, recorded: str, current: str) -> None:
        super().__init__(
            f"this store's vectors were made by embedding model {recorded}, but this "
            f"profile's embedder is model {current}; vectors of two models cannot be mixed. "
            "Use the model the store was made with (the profile's `[uda] embedder` and "
            "`model_path`), or re-embed: index the same sources into a new data folder with "
            "this embedder (`uda --path NEW_FOLDER ingest SOURCE`)",
            field="embedder",
            value=current,
        )
        self.recorded = recorded
        self.current = current


class ConnectorError(UDAError):
    """A backend failed. Always raised `from` the backend's exception; names the connector."""

    def __init__(self, connector: str, message: str) -> None:
        super().__init__(f"{connector}: {message}")
        self.connector = connector


class TransientBackendError(ConnectorError):
    """A backend failure that may pass on the next try.

    A connection reset or dropped, a serialization failure, a server answering 503 while it
    starts.
    Connectors raise it (they know their drivers); the planner retries the call with
    backoff and jitter within its deadline, and only then counts it a failure.
    """


class StoresBehindError(ConnectorError):
    """A write stands in the system of record, but some derived stores did not take it.

    Nothing is lost: the outbox keeps what they still need, and `uda sync` (`client.sync()`)
    applies it once they answer. `behind` names each store and why; `report` is what the
    write did (an `IngestReport`), when it came from one.
    """

    def __init__(self, behind: dict[str, str], report: Any = None) -> None:
        names = ", ".join(sorted(behind))
        reasons = "; ".join(f"{name}: {why}" for name, why in sorted(behind.items()))
        super().__init__(
            names,
            f"written to the system of record, not yet to {names} ({reasons}); "
            "run `uda sync` when it is back",
        )
        self.behind = behind
        self.report = report


class BackendUnavailableError(ConnectorError):
    """A backend a search cannot do without failed or missed its deadline (HTTP 503).

    The system of record is never optional: without it clearance cannot be enforced, so a
    search fails fast rather than answer unchecked.
    """

    def __init__(self, connector: str, message: str) -> None:
        super().__init__(connector, message)
        self.reason = message


class PlanError(UDAError):
    """UDA could not run a phase of the plan; names the phase."""

    def __init__(self, phase: str, message: str) -> None:
        super().__init__(f"{phase}: {message}")
        self.phase = phase


class ClockSkewError(UDAError):
    """A remote HLC timestamp is further ahead of the local clock than the allowed offset."""


__all__ = [
    "BackendUnavailableError",
    "ClockSkewError",
    "ConfigError",
    "ConnectorError",
    "EmbeddingModelMismatchError",
    "InvalidAggregateError",
    "InvalidElementError",
    "InvalidRequestError",
    "MissingCapabilityError",
    "MissingElementError",
    "NothingToTuneError",
    "PlanError",
    "QueryNotFoundError",
    "StoresBehindError",
    "TransientBackendError",
    "UDAError",
    "UnknownClearanceError",
    "UnknownConnectorError",
    "UnknownElementTypeError",
    "UnknownFilterFieldError",
    "UnknownRelationError",
    "UserError",
]
