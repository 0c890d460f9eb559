"""Conformance of `RelationalCapable.select_states` (structured retrieval) and `instance_secret`.

The reference order is `connectors.contract.selection.sort_key`: a store must return exactly
the states the filter lets through (it may push down less, never more), in that order, one
keyset page after another.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import pytest_asyncio

from connectors.base import Connector, RelationalCapable
from connectors.conformance.data import HOSTILE_IDS, edge, state
from connectors.conformance.fixtures import ConformanceBase, Harness, claim
from connectors.contract.filter_tree import RelationPredicate
from connectors.contract.predicates import Op, Predicate, Scalar
from connectors.contract.records import SearchFilter
from connectors.contract.selection import (
    Keyset,
    OrderKind,
    StateOrder,
    StateSelection,
    sort_key,
)
from connectors.contract.system_of_record import StoredState, WriteBatch

EVERYTHING = SearchFilter(max_sensitivity_rank=3, all_projects=True)
ORDERS: tuple[tuple[str, OrderKind], ...] = (
    ("element_id", "text"),
    ("name", "text"),
    ("timestamp", "number"),
    ("label", "text"),  # a filter value: strings, a number, a boolean, missing
    ("size", "number"),  # a filter value: ints and floats, a string, a boolean, missing
)
LABELS: tuple[Scalar | None, ...] = ("b", "a", "B", "é", "a", None, 7, True, "", "ab")
SIZES: tuple[Scalar | None, ...] = (3, 1.5, -2, 3, None, "3", False, 2**40, 0.1, 1)


def _corpus() -> list[StoredState]:
    states: list[StoredState] = []
    for n, (label, size) in enumerate(zip(LABELS, SIZES, strict=True)):
        values: dict[str, Scalar] = {"element_type": "Document"}
        if label is not None:
            values["label"] = label
        if size is not None:
            values["size"] = size
        # Ids out of their insertion order; some share a timestamp (hlc >> 16).
        states.append(
            state(
                f"e{(n * 7) % 10}",
                1,
                ((n % 4) << 16) + 100 + n,
                sensitivity_rank=n % 4,
                scope=None if n % 3 else "project:a",
                filter_values=values,
            )
        )
    return states


async def _pages(
    store: RelationalCapable,
    order: StateOrder,
    limit: int,
    search_filter: SearchFilter,
    related: tuple[RelationPredicate, ...] = (),
) -> list[StoredState]:
    out: list[StoredState] = []
    after: Keyset | None = None
    for _ in range(50):
        page = await store.select_states(
            StateSelection(
                search_filter=search_filter, order=order, limit=limit, after=after, related=related
            )
        )
        out += page
        if len(page) < limit:
            return out
        after = Keyset.of(order, page[-1])
    raise AssertionError("select_states never ran out of rows")


def _ids(states: Sequence[StoredState]) -> list[str]:
    return [s.element_id for s in states]


class SelectionConformance(ConformanceBase):
    """Structured retrieval for connectors that claim `RelationalCapable`."""

    @pytest_asyncio.fixture
    async def relational(self, harness: Harness) -> RelationalCapable:
        """A fresh connector as RelationalCapable, or a skip naming the capability."""
        return claim(await harness.new(), RelationalCapable)

    async def test_relational_select_states_pages_in_the_reference_order(
        self, relational: RelationalCapable
    ) -> None:
        """Every order, both directions, any page size: the reference order, no gap, no repeat."""
        states = _corpus()
        await relational.commit(WriteBatch(states=states, hlc=max(s.hlc for s in states)))
        for field, kind in ORDERS:
            for descending in (False, True):
                order = StateOrder(field=field, kind=kind, descending=descending)
                expected = _ids(sorted(states, key=lambda s: sort_key(order, s)))
                for limit in (1, 3, 100):
                    got = await _pages(relational, order, limit, EVERYTHING)
                    assert _ids(got) == expected, (field, descending, limit)

    async def test_relational_select_states_applies_clearance_validity_and_tombstones(
        self, relational: RelationalCapable
    ) -> None:
        """Only current (or as-of) states, never tombstones; a filter may only narrow."""
        old = state("kept", 1, 100, valid_to=200, filter_values={"label": "old"})
        new = state("kept", 2, 200, sensitivity_rank=2, filter_values={"label": "new"})
        gone_old = state("gone", 1, 100, valid_to=300)
        gone = state("gone", 2, 300, tombstone=True)
        secret = state("secret", 1, 150, sensitivity_rank=3)
        scoped = state("scoped", 1, 160, scope="project:b")
        await relational.commit(
            WriteBatch(states=[old, new, gone_old, gone, secret, scoped], hlc=300)
        )
        order = StateOrder(field="element_id", kind="text")
        now = await _pages(relational, order, 2, EVERYTHING)
        assert _ids(now) == ["kept", "scoped", "secret"]
        assert now[0].version == 2
        then = await _pages(relational, order, 2, SearchFilter(max_sensitivity_rank=3, as_of=250))
        assert _ids(then) == ["gone", "kept", "secret"]
        kept = next(s for s in then if s.element_id == "kept")
        assert (kept.version, kept.latest_sensitivity_rank) == (2, 2)
        narrow = SearchFilter(max_sensitivity_rank=1, projects=("project:a",))
        for row in await _pages(relational, order, 2, narrow):
            assert row.element_id in {"kept", "scoped", "secret"}  # looser is allowed
        assert "kept" not in _ids(await _pages(relational, order, 2, narrow))  # rank 2 > 1

    async def test_relational_select_states_takes_hostile_ids_as_data(
        self, relational: RelationalCapable
    ) -> None:
        """Quotes, SQL and JSON in ids, values and the order field are data, never syntax."""
        states = [
            state(text, 1, 100 + n, filter_values={"label": text, HOSTILE_IDS[2]: text})
            for n, text in enumerate(HOSTILE_IDS)
        ]
        await relational.commit(WriteBatch(states=states, hlc=200))
        for field in ("label", HOSTILE_IDS[2], HOSTILE_IDS[3]):
            order = StateOrder(field=field, kind="text")
            expected = _ids(sorted(states, key=lambda s: sort_key(order, s)))
            assert _ids(await _pages(relational, order, 4, EVERYTHING)) == expected

    async def test_relational_select_states_keeps_every_row_a_relation_or_column_lets_through(
        self, relational: RelationalCapable
    ) -> None:
        """Relation leaves and predicates on fields that are also columns never drop a match.

        Leaves by name, by id and by any value, in both directions, now and as of a stamp:
        every row that satisfies them is returned, in the reference order.
        """

        def repository(element_id: str, rank: int, tier: int) -> StoredState:
            values: dict[str, Scalar] = {
                "element_type": "Repository",
                "element_id": element_id,
                "name": f"name of {element_id}",
                "tier": tier,
            }
            return state(element_id, 1, 100, sensitivity_rank=rank, filter_values=values)

        def document(element_id: str) -> StoredState:
            values: dict[str, Scalar] = {
                "element_type": "Document",
                "element_id": element_id,
                "name": f"name of {element_id}",
                "timestamp": 100 >> 16,
            }
            return state(element_id, 1, 100, filter_values=values)

        states = [repository("ra", 0, 1), repository("rb", 1, 2), repository("rs", 3, 1)]
        states += [document(f"d{n}") for n in range(6)]
        edges = [
            edge("d0", "partOf", "ra"),
            edge("d1", "partOf", "rb"),
            edge("d2", "partOf", "rs"),  # a neighbour the filter below may not see
            edge("d3", "partOf", "ra", valid_to=200),
            edge("d5", "partOf", "ra"),
            edge("d5", "partOf", "rb"),
        ]
        await relational.commit(WriteBatch(states=states, edges=edges, hlc=300))
        order = StateOrder(field="element_id", kind="text", descending=True)

        def partof(op: Op, field: str, value: Scalar | tuple[Scalar, ...]) -> RelationPredicate:
            return RelationPredicate(
                relation="partOf",
                direction="out",
                predicate=Predicate(field=field, op=op, value=value),
            )

        cases: list[tuple[RelationPredicate, int | None, set[str]]] = [
            (partof(Op.EQ, "name", "name of ra"), None, {"d0", "d5"}),
            (partof(Op.EQ, "name", "name of ra"), 150, {"d0", "d3", "d5"}),
            (partof(Op.IN, "name", ("name of rb", "name of rs")), None, {"d1", "d5"}),
            (partof(Op.EQ, "element_id", "ra"), 150, {"d0", "d3", "d5"}),
            (partof(Op.EQ, "tier", 1), None, {"d0", "d5"}),
            (partof(Op.GTE, "tier", 1), 150, {"d0", "d1", "d3", "d5"}),
            (
                RelationPredicate(
                    relation="partOf",
                    direction="in",
                    predicate=Predicate(field="element_id", op=Op.EQ, value="d1"),
                ),
                None,
                {"rb"},
            ),
        ]
        for relation, as_of, expected in cases:
            search_filter = SearchFilter(max_sensitivity_rank=1, all_projects=True, as_of=as_of)
            for limit in (1, 100):
                got = await _pages(relational, order, limit, search_filter, (relation,))
                assert expected <= set(_ids(got)), (relation, as_of, limit)
                assert _ids(got) == sorted(_ids(got), reverse=True)
        by_columns = SearchFilter(
            max_sensitivity_rank=1,
            all_projects=True,
            predicates=(
                Predicate(field="name", op=Op.IN, value=("name of d1", "name of d4")),
                Predicate(field="timestamp", op=Op.GTE, value=100 >> 16),
                Predicate(field="element_type", op=Op.EQ, value="Document"),
                Predicate(field="element_id", op=Op.LTE, value="d3"),  # text: no column bound
            ),
        )
        assert {"d1"} <= set(_ids(await _pages(relational, order, 1, by_columns)))

    async def test_relational_instance_secret_is_kept_with_the_store(
        self, relational: RelationalCapable, harness: Harness
    ) -> None:
        """One random secret per store: the same after a reopen, another in another store."""
        secret = await relational.instance_secret()
        assert len(secret) == 32
        assert await relational.instance_secret() == secret
        reopened = claim(await harness.reopen(cast("Connector", relational)), RelationalCapable)
        assert await reopened.instance_secret() == secret
        other = claim(await harness.new(), RelationalCapable)
        assert await other.instance_secret() != secret
