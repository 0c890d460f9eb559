"""State heads (ADR 51): the base class's reads of them, unread filter values, and when a
search reads those.

`RelationalCapable.fetch_heads` and `fetch_versions` have defaults derived from `fetch`, for
a system of record that does not override them; SQLite overrides both with one query each.
Both are run here on the same real store, after writes that make the default take its
slower branch (a head whose element has a newer version since).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from connectors.base import RelationalCapable
from connectors.conformance.data import state
from connectors.contract.system_of_record import UNREAD, WriteBatch
from connectors.sqlite.connector import SQLiteConnector


async def test_the_defaults_read_what_the_store_reads(tmp_path: Path) -> None:
    sor = SQLiteConnector(tmp_path / "sor.sqlite3")
    await sor.connect()
    try:
        await sor.commit(WriteBatch(states=[state(e, 1, 100) for e in ("a", "b", "c")], hlc=100))
        before = await sor.fetch_heads(["a", "b", "c"], None)
        await sor.commit(
            WriteBatch(
                states=[state("a", 2, 200, sensitivity_rank=2), state("b", 2, 300)],
                retire=[("a", 1, 200), ("b", 1, 300)],
                hlc=300,
            )
        )
        for as_of in (None, 150, 250):
            ids = ["a", "b", "c", "missing"]
            assert await RelationalCapable.fetch_heads(sor, ids, as_of) == await sor.fetch_heads(
                ids, as_of
            )
        heads = [*before.values(), dataclasses.replace(before["c"], element_id="missing")]
        derived = await RelationalCapable.fetch_versions(sor, heads)
        assert derived == await sor.fetch_versions(heads)
        assert {eid: s.version for eid, s in derived.items()} == {"a": 1, "b": 1, "c": 1}
        assert derived["a"].latest_sensitivity_rank == 2  # the newest clearance, now
    finally:
        await sor.close()


async def test_unread_filter_values_refuse_to_be_read(tmp_path: Path) -> None:
    """A head read without its filter values cannot pass for an element without values."""
    sor = SQLiteConnector(tmp_path / "sor.sqlite3")
    await sor.connect()
    try:
        await sor.commit(WriteBatch(states=[state("a", 1, 100)], hlc=100))
        head = (await sor.fetch_heads(["a"], None, filter_values=False))["a"]
    finally:
        await sor.close()
    assert head.filter_values is UNREAD
    with pytest.raises(LookupError, match="without its filter values"):
        _ = head.filter_values["element_type"]
    with pytest.raises(LookupError):
        dict(head.filter_values)


def test_a_search_reads_filter_values_only_for_a_value_predicate() -> None:
    """Relation paths read the neighbours' values; only a value predicate reads the candidate's."""
    from ranking_fixtures import planned

    from uda.query.auto.choice import AutoChoice, AutoMode
    from uda.query.candidates import needs_filter_values

    choice = AutoChoice(mode=AutoMode.CONTEXT, reason="test")
    assert not needs_filter_values(planned(choice))
    assert not needs_filter_values(planned(choice, context_filters={"partOf.name": "payments"}))
    assert needs_filter_values(planned(choice, context_filters={"status": "accepted"}))
    mixed = {"$or": [{"partOf.name": "payments"}, {"$not": {"status": "rejected"}}]}
    assert needs_filter_values(planned(choice, context_filters=mixed))
