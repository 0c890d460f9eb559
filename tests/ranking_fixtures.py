"""Hand-made element states and plans for tests of ranking and planning (no store behind them)."""

from __future__ import annotations

import json

from connectors.contract.system_of_record import LazyJSON, StoredState
from uda.config import SearchDefaults
from uda.query.auto.choice import AutoChoice
from uda.query.contracts import SearchRequest
from uda.query.plan import Plan, make_plan


def stored_document(element_id: str, name: str | None = None) -> StoredState:
    """A public, current `Document` state at HLC 1, named `name` (default: its id)."""
    name = element_id if name is None else name
    payload = {"element_id": element_id, "name": name, "text": "t", "sensitivity": "public"}
    return StoredState(
        element_id=element_id,
        version=1,
        hlc=1,
        element_type="Document",
        name=name,
        sensitivity_rank=0,
        scope=None,
        timestamp_ms=0,
        tombstone=False,
        content_hash=element_id,
        payload=LazyJSON(json.dumps(payload)),
        filter_values=LazyJSON("{}"),
    )


def planned(choice: AutoChoice, defaults: SearchDefaults | None = None, **fields: object) -> Plan:
    """A plan of the query "q" with `choice` as the automatic mode, on stand-in connectors."""
    return make_plan(
        SearchRequest.build(query="q", **fields),
        defaults or SearchDefaults(),
        vector=("v",),
        text=("t",),
        graph=("g",),
        system_of_record="s",
        auto=choice,
    )
