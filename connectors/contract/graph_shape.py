"""The shape of a store's graph, as the system of record counts it (`graph_shape`).

What the planner's automatic mode reads to decide how to use the graph (uda/query/auto):
whether knowledge assets meet through shared nodes at all, and how selective a walk
through those nodes is. Counted over what one clearance may see:
counted per clearance, so that what a caller may not see never changes how its search ranks
(the planner asks with the caller's clearance; `uda stats` with `EVERYTHING`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

# Ordered pairs of assets that share a bridge, summed over the bridges: a bridge adjacent
# to d assets links d * (d - 1) of them. Only what the clearance may see counts: a current
# state within its rank and projects, an edge between two such states (as the planner's
# graph context, uda/query/graph_context.py). Both systems of record run this statement
# with their own placeholders for the rank, whether every project is allowed, the projects
# (a list) and the asset types (a list), and the live-state marker `{open}`.
_VISIBLE_LINKS = """
WITH visible AS (
    SELECT element_id, element_type FROM states
    WHERE valid_to = {open} AND NOT tombstone AND sensitivity_rank >= 0
      AND sensitivity_rank <= {rank}
      AND ({all_projects} OR scope IS NULL OR scope IN ({projects}))),
assets AS (SELECT element_id FROM visible WHERE element_type IN ({types})),
live AS (
    SELECT e.source_id, e.target_id FROM edges e
    JOIN visible s ON s.element_id = e.source_id
    JOIN visible t ON t.element_id = e.target_id
    WHERE e.valid_to = {open} AND e.source_id <> e.target_id),
links AS (
    SELECT l.source_id AS node, l.target_id AS asset
    FROM live l JOIN assets a ON a.element_id = l.target_id
    UNION
    SELECT l.target_id AS node, l.source_id AS asset
    FROM live l JOIN assets a ON a.element_id = l.source_id)"""
_SHAPE = """,
bridges AS (SELECT node, count(*) AS d FROM links GROUP BY node HAVING count(*) >= 2)
SELECT (SELECT count(*) FROM assets), (SELECT count(*) FROM live), count(*),
       coalesce(sum(d * (d - 1)), 0), coalesce(max(d), 0)
FROM bridges
"""
GRAPH_SHAPE_SQL = _VISIBLE_LINKS + _SHAPE
# The bridges adjacent to between two and `{widest}` assets, by id (`uda tune` samples them:
# a selective bridge is where a second hop can tell something). Same placeholders as the
# shape, then `{widest}`.
BRIDGES_SQL = (
    _VISIBLE_LINKS
    + "\nSELECT node FROM links GROUP BY node HAVING count(*) >= 2 AND count(*) <= {widest}"
    + "\nORDER BY node\n"
)
# The assets adjacent to some bridges: the shape's placeholders, then `{nodes}` (a list).
BRIDGE_ASSETS_SQL = (
    _VISIBLE_LINKS
    + "\nSELECT node, asset FROM links WHERE node IN ({nodes}) ORDER BY node, asset\n"
)


def assets_by_node(rows: Iterable[Sequence[object]]) -> dict[str, list[str]]:
    """`BRIDGE_ASSETS_SQL`'s (node, asset) rows, grouped by node in row order."""
    found: dict[str, list[str]] = {}
    for node, asset in rows:
        found.setdefault(str(node), []).append(str(asset))
    return found


@dataclass(frozen=True)
class ShapeClearance:
    """Whose view of the graph to count: a rank and projects, as a search's clearance."""

    max_sensitivity_rank: int
    projects: tuple[str, ...] = ()
    all_projects: bool = False


EVERYTHING = ShapeClearance(max_sensitivity_rank=2**31 - 1, all_projects=True)
"""The operator's view (`uda stats`): every current element and edge."""


@dataclass(frozen=True, kw_only=True)
class GraphShape:
    """Counts over the current graph.

    Attributes:
        assets: current knowledge assets (the elements a search can return).
        edges: current edges (self-loops left out).
        bridges: nodes adjacent to two or more assets (an entity two passages mention, a
            repository, an asset linked to others): where a walk goes from one asset to more.
        asset_pairs: ordered pairs of assets that share a bridge.
        widest_bridge: the most assets adjacent to one node.
    """

    assets: int
    edges: int
    bridges: int
    asset_pairs: int
    widest_bridge: int

    @property
    def neighbours_per_asset(self) -> float:
        """Assets two hops away (through one bridge) per asset, on average."""
        return self.asset_pairs / self.assets if self.assets else 0.0

    def to_dict(self) -> dict[str, float]:
        """Plain figures, with `neighbours_per_asset`."""
        return {**asdict(self), "neighbours_per_asset": round(self.neighbours_per_asset, 3)}

    @classmethod
    def of_row(cls, row: tuple[object, ...]) -> GraphShape:
        """From `GRAPH_SHAPE_SQL`'s one row."""
        assets, edges, bridges, pairs, widest = (int(str(v)) for v in row)
        return cls(
            assets=assets, edges=edges, bridges=bridges, asset_pairs=pairs, widest_bridge=widest
        )


__all__ = [
    "BRIDGES_SQL",
    "BRIDGE_ASSETS_SQL",
    "EVERYTHING",
    "GRAPH_SHAPE_SQL",
    "GraphShape",
    "ShapeClearance",
    "assets_by_node",
]
