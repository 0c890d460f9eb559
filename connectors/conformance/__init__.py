"""The connector conformance suite: one set of pytest classes every connector must pass.

The suite ships inside the package, as fsspec's abstract tests do, so that the author of a
connector (built in or third party) runs exactly the tests the built-in connectors run. An
implementation provides fixtures only; the tests are inherited.

Fixture contract
----------------
`connector_factory` (required, defined in your test class)
    Returns an object with two coroutines (`ConnectorFactory`):

    - `async def new() -> Connector`: a fresh, **empty**, **connected** connector. Every call
      gets its own data (a new folder, collection, schema or database), so tests never share
      state.
    - `async def reopen(old) -> Connector`: close `old` and return a new connector, connected
      to the **same** data (used by the persistence tests).

    and optionally `exact_vectors: bool` (default False): True when `vector_search` is exact
    (brute force); ranking tests then require the exact cosine top-k in order, instead of a
    recall >= 0.9. `LocationFactory` builds such an object from a constructor and a stream
    of fresh locations.
`dimension` (optional, default 384)
    The embedding dimension the connector stores; override it in your class if it differs.

The suite closes every connector it obtained when a test ends.

Capabilities gate the tests: each class asks `isinstance(connector, VectorCapable)` (etc.)
and skips, naming the capability, when the connector does not claim it. A connector that
claims a capability and fails is a failure, never a skip. A documented gap is declared as a
strict xfail in `known_gaps`, by test name; a gap that gets fixed turns the xfail into a
failure (XPASS strict), so the declaration cannot go stale.

Example (a `tests/test_conformance.py` of your own)::

    import pytest
    from connectors.conformance import ConnectorConformance, LocationFactory, numbered
    from my_package import MyConnector


    class TestMyConnector(ConnectorConformance):
        known_gaps = {
            "test_vector_filter_edge_cases": pytest.mark.xfail(
                strict=True, raises=AssertionError, reason="string ranges not pushed down"
            ),
        }

        @pytest.fixture
        def connector_factory(self, tmp_path):
            return LocationFactory(
                make=lambda folder: MyConnector(path=folder),
                locations=numbered(lambda n: tmp_path / f"db-{n}"),
                exact_vectors=True,
            )

        @pytest.fixture
        def dimension(self):
            return 768

Run it with `pytest` (pytest-asyncio installed; the tests and fixtures are marked, so both
its `auto` and `strict` modes work). Test names start with their capability (`test_vector_`,
`test_text_`, `test_graph_`, `test_relational_`, `test_lifecycle_`), so `-k vector` selects
one capability. Classes for a single capability (`VectorConformance`, `TextConformance`,
`GraphConformance`, `RelationalConformance`, `LifecycleConformance`) can be combined instead
of the whole `ConnectorConformance`. `FilterTreeConformance` checks filter trees through the
vector and text legs on random trees (it needs `hypothesis`, and skips without it).
"""

from __future__ import annotations

import pytest

# Plain `assert` statements must be rewritten to report their values; pytest only rewrites
# test modules and what is registered before it is imported.
pytest.register_assert_rewrite(
    "connectors.conformance.fixtures",
    "connectors.conformance.vector",
    "connectors.conformance.text",
    "connectors.conformance.graph",
    "connectors.conformance.relational",
    "connectors.conformance.relational_states",
    "connectors.conformance.relational_edges",
    "connectors.conformance.relational_outbox",
    "connectors.conformance.selection",
    "connectors.conformance.lifecycle",
    "connectors.conformance.trees",
)

from connectors.conformance.fixtures import (  # noqa: E402 - after the rewrite registration
    ConformanceBase,
    ConnectorFactory,
    Harness,
    LocationFactory,
    claim,
    numbered,
)
from connectors.conformance.graph import GraphConformance  # noqa: E402
from connectors.conformance.lifecycle import LifecycleConformance  # noqa: E402
from connectors.conformance.relational import RelationalConformance  # noqa: E402
from connectors.conformance.selection import SelectionConformance  # noqa: E402
from connectors.conformance.text import TextConformance  # noqa: E402
from connectors.conformance.trees import FilterTreeConformance  # noqa: E402
from connectors.conformance.vector import VectorConformance  # noqa: E402


class ConnectorConformance(
    VectorConformance,
    TextConformance,
    FilterTreeConformance,
    GraphConformance,
    RelationalConformance,
    SelectionConformance,
    LifecycleConformance,
):
    """Every conformance test; subclass it and define `connector_factory`."""


__all__ = [
    "ConformanceBase",
    "ConnectorConformance",
    "ConnectorFactory",
    "FilterTreeConformance",
    "GraphConformance",
    "Harness",
    "LifecycleConformance",
    "LocationFactory",
    "RelationalConformance",
    "SelectionConformance",
    "TextConformance",
    "VectorConformance",
    "claim",
    "numbered",
]
