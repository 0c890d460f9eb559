"""The system of record's reads over the whole graph: its shape and its bridges.

The statements are `connectors.contract.graph_shape`'s, with SQLite's placeholders. Every
one takes the clearance's rank, whether every project is allowed, its projects and the
asset types (both as JSON lists) first, in that order.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from connectors.contract.graph_shape import (
    BRIDGE_ASSETS_SQL,
    BRIDGES_SQL,
    GRAPH_SHAPE_SQL,
    ShapeClearance,
)
from connectors.contract.records import OPEN

_PLACEHOLDERS = {
    "open": OPEN,
    "rank": "?",
    "all_projects": "?",
    "projects": "SELECT value FROM json_each(?)",
    "types": "SELECT value FROM json_each(?)",
}
GRAPH_SHAPE = GRAPH_SHAPE_SQL.format(**_PLACEHOLDERS)
BRIDGES = BRIDGES_SQL.format(**_PLACEHOLDERS, widest="?")
BRIDGE_ASSETS = BRIDGE_ASSETS_SQL.format(**_PLACEHOLDERS, nodes="SELECT value FROM json_each(?)")


def view_parameters(
    asset_types: Sequence[str], clearance: ShapeClearance
) -> tuple[int, int, str, str]:
    """The parameters every statement here starts with."""
    return (
        clearance.max_sensitivity_rank,
        int(clearance.all_projects),
        json.dumps(list(clearance.projects)),
        json.dumps(list(asset_types)),
    )


__all__ = ["BRIDGES", "BRIDGE_ASSETS", "GRAPH_SHAPE", "view_parameters"]
