"""The fast edge constructor builds exactly what the dataclass's own constructor builds."""

from __future__ import annotations

import dataclasses

import pytest

from connectors.contract.records import OPEN, GraphEdge, graph_edge


@pytest.mark.parametrize("valid_to", [OPEN, 250])
def test_graph_edge_is_the_dataclass_instance(valid_to: int) -> None:
    built = graph_edge("a", "partOf", "b", 100, valid_to)
    expected = GraphEdge(
        source_id="a", relation="partOf", target_id="b", valid_from=100, valid_to=valid_to
    )
    assert type(built) is GraphEdge
    assert built == expected
    assert hash(built) == hash(expected)
    assert repr(built) == repr(expected)
    assert dataclasses.asdict(built) == dataclasses.asdict(expected)
    assert built.key == ("a", "partOf", "b")
    assert built.valid_at(None) is (valid_to == OPEN)


def test_graph_edge_stays_frozen() -> None:
    edge = graph_edge("a", "partOf", "b", 100, OPEN)
    with pytest.raises(dataclasses.FrozenInstanceError):
        edge.relation = "governedBy"  # type: ignore[misc]
