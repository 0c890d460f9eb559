"""Conformance of `RelationalCapable`, the system of record: states, versions, edges, outbox.

`RelationalConformance` combines one class per contract area, each in its own module:

- `relational_states`: commits and the reads of states (versions, `as_of`, clearances,
  tombstones, chunks, live ids by prefix), and a failed commit writing nothing;
- `relational_edges`: edges and their validity, the graph shape and bridges per clearance,
  the tuning document;
- `relational_outbox`: the outbox, the last HLC, counts and the listings the derived stores
  are checked against, on a fresh store and with hostile ids.
"""

from __future__ import annotations

from connectors.conformance.relational_edges import RelationalEdgesConformance, edge_set
from connectors.conformance.relational_outbox import (
    COUNT_KEYS,
    STORES,
    RelationalOutboxConformance,
    outbox_view,
)
from connectors.conformance.relational_states import RelationalStatesConformance


class RelationalConformance(
    RelationalStatesConformance,
    RelationalEdgesConformance,
    RelationalOutboxConformance,
):
    """Tests for connectors that claim `RelationalCapable` (skipped for the others)."""


__all__ = [
    "COUNT_KEYS",
    "STORES",
    "RelationalConformance",
    "RelationalEdgesConformance",
    "RelationalOutboxConformance",
    "RelationalStatesConformance",
    "edge_set",
    "outbox_view",
]
