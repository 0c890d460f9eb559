"""The fixture contract of the conformance suite, and the harness every test class shares.

An implementation provides one fixture, `connector_factory`, returning a `ConnectorFactory`;
it may override `dimension`. Everything else (opening, capability gating, closing, known
gaps) lives here, so that the test modules hold assertions only.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Generic, Protocol, TypeVar, runtime_checkable

import pytest
import pytest_asyncio

from connectors.base import Connector

C = TypeVar("C")
L = TypeVar("L", bound=Hashable)


@runtime_checkable
class ConnectorFactory(Protocol):
    """What the `connector_factory` fixture returns.

    `new()` gives a fresh, empty, connected connector (each call its own data: a new folder,
    collection, schema or database). `reopen(old)` closes `old` and returns a new connector,
    connected to the same data (the persistence tests). An optional attribute
    `exact_vectors: bool` (default False) says that `vector_search` is exact (brute force),
    which makes the ranking tests strict instead of requiring recall >= 0.9.
    """

    async def new(self) -> Connector:
        """A fresh, empty, connected connector."""
        ...

    async def reopen(self, old: Connector) -> Connector:
        """Close `old`; a connected connector over the same data."""
        ...


@dataclass(kw_only=True)
class LocationFactory(Generic[L]):
    """A ready-made `ConnectorFactory`: one new location (folder, collection...) per `new()`.

    Args:
        make: builds an unconnected connector for a location.
        locations: yields a new, unused location per call (`tmp_path / f"db-{n}"`, a fresh
            collection name, a new schema).
        exact_vectors: whether `vector_search` is exact.
    """

    make: Callable[[L], Connector]
    locations: Iterator[L]
    exact_vectors: bool = False
    _where: dict[int, tuple[Connector, L]] = field(
        default_factory=dict[int, tuple[Connector, L]], init=False, repr=False
    )

    async def new(self) -> Connector:
        """Connect a connector at a new location."""
        return await self._open(next(self.locations))

    async def reopen(self, old: Connector) -> Connector:
        """Close `old`, then connect a new connector at its location."""
        _, location = self._where[id(old)]
        await old.close()
        return await self._open(location)

    async def _open(self, location: L) -> Connector:
        connector = self.make(location)
        await connector.connect()
        self._where[id(connector)] = (connector, location)
        return connector


def numbered(make_location: Callable[[int], L]) -> Iterator[L]:
    """Locations `make_location(0)`, `make_location(1)`, ... for `LocationFactory`."""
    return (make_location(n) for n in itertools.count())


@dataclass(kw_only=True)
class Harness:
    """Opens connectors through the factory and closes every one of them after the test."""

    factory: ConnectorFactory
    dimension: int
    opened: list[Connector] = field(default_factory=list[Connector])

    @property
    def exact_vectors(self) -> bool:
        """Whether the factory declared exact vector search."""
        return bool(getattr(self.factory, "exact_vectors", False))

    async def new(self) -> Connector:
        """A fresh connector from the factory (closed after the test)."""
        connector = _connector(
            await self.factory.new(), "connector_factory.new() returned {!r}, not a Connector"
        )
        self.opened.append(connector)
        return connector

    async def reopen(self, old: Connector) -> Connector:
        """The same data through a new connection (closed after the test)."""
        connector = _connector(
            await self.factory.reopen(old), "connector_factory.reopen() returned {!r}"
        )
        self.opened.append(connector)
        return connector

    async def close_all(self) -> None:
        """Close every connector opened (close is idempotent by contract)."""
        for connector in reversed(self.opened):
            await connector.close()
        self.opened.clear()


def _connector(returned: object, message: str) -> Connector:
    """What a factory returned, checked at run time: the factory is the implementer's code."""
    if not isinstance(returned, Connector):
        raise TypeError(message.format(returned))
    return returned


def claim(connector: Connector, capability: type[C]) -> C:
    """`connector` as `capability`, or skip the test naming the capability it does not claim.

    Only a connector that does not declare the capability is skipped; one that declares it
    runs the test, and its failures are failures.
    """
    if not isinstance(connector, capability):
        pytest.skip(
            f"{type(connector).__name__} ({connector.name!r}) does not claim {capability.__name__}"
        )
    return connector


class ConformanceBase:
    """Fixtures shared by every conformance class (the author adds `connector_factory`).

    `known_gaps` maps a test name to a strict xfail mark, for the conformance failures a
    connector has and its author has documented:
    `{"test_text_query_syntax_is_data": pytest.mark.xfail(strict=True, reason=..., raises=...)}`.
    """

    # Every test is a coroutine; marked so that pytest-asyncio's strict mode runs them too.
    pytestmark: ClassVar[list[pytest.MarkDecorator]] = [pytest.mark.asyncio]
    known_gaps: ClassVar[Mapping[str, pytest.MarkDecorator]] = {}

    @pytest.fixture
    def dimension(self) -> int:
        """The connector's embedding dimension (override in the test class if not 384)."""
        return 384

    @pytest_asyncio.fixture
    async def harness(
        self, connector_factory: ConnectorFactory, dimension: int
    ) -> AsyncIterator[Harness]:
        """Opens connectors for one test; closes them all afterwards."""
        harness = Harness(factory=connector_factory, dimension=dimension)
        try:
            yield harness
        finally:
            await harness.close_all()

    @pytest.fixture(autouse=True)
    def _known_gap(self, request: pytest.FixtureRequest) -> None:
        """Apply the class's strict xfail for this test, if it declares one."""
        mark = self.known_gaps.get(request.function.__name__)
        if mark is None:
            return
        kwargs = mark.kwargs
        if mark.name != "xfail" or kwargs.get("strict") is not True:
            pytest.fail(
                f"known gap {request.function.__name__}: use pytest.mark.xfail(strict=True)"
            )
        if not kwargs.get("reason") or "raises" not in kwargs:
            pytest.fail(f"known gap {request.function.__name__}: give a reason and raises=")
        request.applymarker(mark)

    async def test_known_gaps_name_real_tests(self) -> None:
        """Every known gap names a test of this class (a typo would silently run the test)."""
        tests = {name for name in dir(type(self)) if name.startswith("test_")}
        unknown = sorted(set(self.known_gaps) - tests)
        assert not unknown, f"known_gaps names tests that do not exist: {unknown}"
