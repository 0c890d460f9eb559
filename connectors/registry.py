"""A lazy registry of connector classes, by name.

Built-in connectors are dotted paths imported on first use (with an install hint when their
library is missing); third parties register through the `uda.connectors` entry-point group.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from connectors.contract.errors import UnknownConnectorError, UserError

if TYPE_CHECKING:
    from connectors.base import Connector

# Packages of this project: an import error inside them is a defect, not a missing library.
_OWN_PACKAGES = frozenset({"connectors", "uda", "ontology"})

# name -> (module:attribute, what to install when the import fails)
BUILTIN: dict[str, tuple[str, str]] = {
    "chroma": ("connectors.chroma.connector:ChromaConnector", "pip install chromadb"),
    "networkx": ("connectors.networkx_graph:NetworkXConnector", "pip install networkx"),
    "sqlite": ("connectors.sqlite.connector:SQLiteConnector", "sqlite3 ships with Python"),
    "postgres": (
        "connectors.postgres.connector:PostgresConnector",
        "pip install 'uda-query[server]'",
    ),
    "arcadedb": (
        "connectors.arcadedb.connector:ArcadeDBConnector",
        "pip install 'uda-query[server]'",
    ),
    "arcadedb-graph": (
        "connectors.arcadedb.connector:ArcadeDBGraphConnector",
        "pip install 'uda-query[server]'",
    ),
}

ENTRY_POINT_GROUP = "uda.connectors"


def available() -> list[str]:
    """Names of every known connector, built-in and installed third-party, sorted."""
    names = set(BUILTIN)
    names.update(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))
    return sorted(names)


def connector_class(name: str) -> type[Connector]:
    """Import and return the connector class registered as `name`.

    Raises:
        UnknownConnectorError: no such connector.
        UserError: its library is not installed (with the install hint).
    """
    if name in BUILTIN:
        target, hint = BUILTIN[name]
        module_name, _, attribute = target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            if not _missing_library(exc):
                raise
            raise UserError(
                f"connector {name!r} needs a library that is not installed ({exc.name}): {hint}",
                field="connector",
                value=name,
            ) from exc
        cls: type[Connector] = getattr(module, attribute)
        return cls
    for ep in entry_points(group=ENTRY_POINT_GROUP, name=name):
        loaded: type[Connector] = ep.load()
        return loaded
    raise UnknownConnectorError(
        f"unknown connector {name!r}; known: {', '.join(available())}",
        field="connector",
        value=name,
    )


def _missing_library(exc: ImportError) -> bool:
    """Whether an import failed because a third-party package is absent.

    A name that cannot be imported from an installed module, or a missing module of this
    project, is a bug or a broken install: hiding it behind an install hint misleads.
    """
    missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
    return missing is not None and missing.partition(".")[0] not in _OWN_PACKAGES
