"""The system of record's reads over the whole graph: its shape and its bridges.

The statements are `connectors.contract.graph_shape`'s, with PostgreSQL's named parameters
`rank`, `all_projects`, `projects` and `types` (`view_parameters`), and the statement's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from connectors.contract.graph_shape import (
    BRIDGE_ASSETS_SQL,
    BRIDGES_SQL,
    GRAPH_SHAPE_SQL,
    ShapeClearance,
)
from connectors.contract.records import OPEN
from connectors.postgres.filter_sql import storable

_PLACEHOLDERS = {
    "open": OPEN,
    "rank": "%(rank)s",
    "all_projects": "%(all_projects)s",
    "projects": "SELECT unnest(%(projects)s::text[])",
    "types": "SELECT unnest(%(types)s::text[])",
}
GRAPH_SHAPE = GRAPH_SHAPE_SQL.format(**_PLACEHOLDERS)
BRIDGES = BRIDGES_SQL.format(**_PLACEHOLDERS, widest="%(widest)s")
BRIDGE_ASSETS = BRIDGE_ASSETS_SQL.format(**_PLACEHOLDERS, nodes="SELECT unnest(%(nodes)s::text[])")


def view_parameters(asset_types: Sequence[str], clearance: ShapeClearance) -> dict[str, Any]:
    """The parameters every statement takes (what PostgreSQL cannot hold matches nothing)."""
    return {
        "rank": clearance.max_sensitivity_rank,
        "all_projects": clearance.all_projects,
        "projects": [p for p in clearance.projects if storable(p)],
        "types": [t for t in asset_types if storable(t)],
    }


__all__ = ["BRIDGES", "BRIDGE_ASSETS", "GRAPH_SHAPE", "view_parameters"]
