"""Reads and writes by id under a principal's clearance: element lookup and ingest checks.

A lookup applies the planner's rules (docs/design.md phase 3): an element is visible iff the state
read and its newest state are visible; context nodes and edges survive only between visible
elements. A hidden element is reported exactly like a missing one.

A writer may only write what it could read: each element's own sensitivity and scope must be
within its grant, it may not replace an element it cannot see (that would declassify it),
and a relation may not point at an element it cannot see — such an endpoint is reported in
the words used for one that does not exist. Refusing to replace a hidden element does tell a
writer that the id is taken; that is the price of not letting writers overwrite what they
cannot read (docs/adr/0011-http-service-and-authenticated-clearance.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from connectors.base import (
    Connector,
    GraphCapable,
    RelationalCapable,
    backend_name,
    system_of_record,
)
from connectors.contract.records import GraphEdge
from connectors.contract.system_of_record import StoredState
from ontology import Element, Relation
from uda.errors import ConfigError, MissingElementError
from uda.http.auth import Principal
from uda.http.errors import ElementNotFoundError, PermissionDeniedError
from uda.query.clearance import Clearance, state_visible
from uda.query.concurrency import together
from uda.query.deadlines import Guard
from uda.query.graph_context import context_hops, reachable_subgraph
from uda.query.rows import element_row, record_batch


def _system_of_record(connectors: Sequence[Connector]) -> RelationalCapable:
    if not connectors:
        raise ConfigError("the client is closed or has no system of record")
    return system_of_record(connectors)


# An element's context is walked as a search result's is (`traverse="context"`): either
# way at the first hop, along the edges' direction after it.
CONTEXT_BACKWARD = 1


async def lookup(
    connectors: Sequence[Connector],
    element_id: str,
    clearance: Clearance,
    *,
    expand_depth: int,
    max_context_nodes: int,
    guard: Guard,
) -> dict[str, Any]:
    """One element with its visible context, as a row of the result schema.

    Every read runs under `guard`'s deadlines: the system of record's are required, the
    graph's optional (without it the element comes without context; `guard.degraded` says
    so).

    Raises:
        ElementNotFoundError: no such element, or one `clearance` may not see (the same error).
        BackendUnavailableError: the system of record failed or was too late.
    """
    sor = _system_of_record(connectors)
    sor_name = backend_name(sor)
    found = await guard.required(sor_name, lambda: sor.fetch([element_id], None))
    state = found.get(element_id)
    if state is None or not state_visible(clearance, state):
        raise ElementNotFoundError("no element with this id", field="element_id", value=element_id)
    graphs = [c for c in connectors if isinstance(c, GraphCapable)]
    edges: dict[tuple[str, str, str], GraphEdge] = {}
    nodes: set[str] = set()
    if expand_depth > 0 and graphs:
        answered = await together(
            [
                guard.optional(
                    g.name,
                    "graph",
                    lambda g=g: g.expand(
                        [element_id], expand_depth, None, None, backward_hops=CONTEXT_BACKWARD
                    ),
                )
                for g in graphs
            ]
        )
        subgraphs = [sub for sub in answered if sub is not None]
        edges = {e.key: e for sub in subgraphs for e in sub.edges}
        nodes = {n for sub in subgraphs for n in sub.nodes} - {element_id}
    states: dict[str, StoredState] = {}
    if nodes:
        states.update(await guard.required(sor_name, lambda: sor.fetch(sorted(nodes), None)))
    states[element_id] = state
    visible = {eid for eid, s in states.items() if state_visible(clearance, s)}
    _, adj = reachable_subgraph(
        edges.values(), visible, [element_id], expand_depth, CONTEXT_BACKWARD
    )
    hops = context_hops(element_id, adj, expand_depth, max_context_nodes, CONTEXT_BACKWARD)
    row = element_row(state, [(hop, states[hop.element_id]) for hop in hops])
    # Through Arrow, so that the row has the values and struct order a search's table has.
    return record_batch([row]).to_pylist()[0]


def _positions(raw: Sequence[Any]) -> dict[str, int]:
    positions: dict[str, int] = {}
    for i, item in enumerate(raw):
        element_id = getattr(item, "element_id", None)
        if element_id is None and isinstance(item, Mapping):
            element_id = item.get("element_id")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if isinstance(element_id, str):
            positions.setdefault(element_id, i)
    return positions


async def check_writable(
    connectors: Sequence[Connector],
    principal: Principal,
    elements: Sequence[Element],
    relations: Iterable[Relation],
    raw_elements: Sequence[Any],
    guard: Guard,
) -> None:
    """Refuse a write the principal's clearance does not cover (see the module docstring).

    Args:
        connectors: the open connectors (the system of record is read).
        principal: the writer.
        elements: the validated elements of the batch.
        relations: the validated relations of the batch.
        raw_elements: the elements as sent, for the positions in error messages.
        guard: the deadlines of the read (without the system of record: a fast 503).

    Raises:
        PermissionDeniedError: an element is above the grant, or replaces a hidden one.
        MissingElementError: a relation points at an element the writer cannot see.
    """
    grant = principal.clearance
    positions = _positions(raw_elements)
    denied = "cannot be written with your clearance"
    for element in elements:
        where = f"elements[{positions.get(element.element_id, 0)}]"
        if not grant.allows(element.sensitivity, element.scope):
            # Name what is out of reach: the level, or else the project.
            above = element.sensitivity.rank > grant.level.rank
            attribute = "sensitivity" if above else "scope"
            raise PermissionDeniedError(
                f"{where}: element {element.element_id!r} {denied} "
                f"(sensitivity {element.sensitivity.value}, scope {element.scope})",
                field=f"{where}.{attribute}",
                value=getattr(element, attribute),
            )
    sor = _system_of_record(connectors)
    batch = {e.element_id for e in elements}
    endpoints = {
        (position, end, getattr(relation, end))
        for position, relation in enumerate(relations)
        for end in ("source_id", "target_id")
    }
    wanted = sorted(batch | {eid for _, _, eid in endpoints})
    sor_name = backend_name(sor)
    latest = await guard.required(sor_name, lambda: sor.latest_states(wanted)) if wanted else {}
    for element in elements:
        state = latest.get(element.element_id)
        if state is not None and not _latest_visible(grant, state):
            where = f"elements[{positions.get(element.element_id, 0)}]"
            raise PermissionDeniedError(
                f"{where}: element {element.element_id!r} {denied}",
                field=f"{where}.element_id",
                value=element.element_id,
            )
    for position, end, element_id in sorted(endpoints):
        if element_id in batch:
            continue
        state = latest.get(element_id)
        if state is not None and (state.tombstone or not _latest_visible(grant, state)):
            # Word for word what `uda.write.validation.check_endpoints` says of a missing element.
            raise MissingElementError(
                f"relations[{position}].{end}: no element {element_id!r} in the batch or the store",
                field=f"relations[{position}].{end}",
                value=element_id,
            )


def _latest_visible(grant: Clearance, state: StoredState) -> bool:
    # `latest_states` returns the newest state itself, tombstones included (a writer may
    # replace a deleted element it could have seen): its own clearance is the newest one.
    return grant.allows_rank(state.sensitivity_rank, state.scope)
