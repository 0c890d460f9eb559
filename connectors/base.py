"""The connector base class and the capability mixins.

A connector says what it can do by listing capabilities among its bases
(`class ChromaConnector(Connector, VectorCapable)`); the planner selects connectors with
`isinstance`, never by product name. Capabilities are small ABCs with abstract members only.
All members are coroutines: connectors over blocking libraries run them in a worker thread.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import ClassVar

from connectors.records import ChunkHit, ChunkRecord, GraphEdge, GraphNode, SearchFilter, Subgraph
from connectors.system_of_record import (
    OutboxItem,
    StoredState,
    WriteBatch,
)


class Connector(ABC):
    """A backend connection. `name` equals the connector's registry key."""

    name: ClassVar[str]

    @abstractmethod
    async def connect(self) -> None:
        """Open the connection (create schemas, load persisted state). Idempotent."""

    @abstractmethod
    async def close(self) -> None:
        """Release the connection; persist what must survive a restart. Idempotent."""


class VectorCapable(ABC):
    """Stores chunk embeddings and finds the nearest ones by cosine similarity."""

    @abstractmethod
    async def upsert_chunks(self, chunks: Sequence[ChunkRecord]) -> None:
        """Insert or replace chunks (embedding and metadata) by `chunk_id`."""

    @abstractmethod
    async def delete_chunks(self, element_ids: Sequence[str]) -> None:
        """Remove every chunk of these elements (purge; tombstones use validity instead)."""

    @abstractmethod
    async def vector_search(
        self, embedding: Sequence[float], k: int, search_filter: SearchFilter
    ) -> list[ChunkHit]:
        """Up to `k` chunks passing the filter, nearest first, score = cosine similarity.

        Must return `k` hits when `k` matching chunks exist, however selective the filter
        (over-fetch or filter inside the index; never filter a fixed top-k afterwards).
        """


class TextCapable(ABC):
    """Indexes chunk text and ranks it lexically (BM25 or full-text search)."""

    @abstractmethod
    async def upsert_text_chunks(self, chunks: Sequence[ChunkRecord]) -> None:
        """Insert or replace chunks in the text index by `chunk_id`."""

    @abstractmethod
    async def text_search(self, query: str, k: int, search_filter: SearchFilter) -> list[ChunkHit]:
        """Up to `k` chunks passing the filter, best first; score is positive, higher better.

        `query` is the user's raw text: the connector must treat it as data, never as query
        syntax.
        """


class GraphCapable(ABC):
    """Stores typed, directed edges and expands a whole batch of ids in one call."""

    @abstractmethod
    async def upsert_nodes(self, nodes: Sequence[GraphNode]) -> None:
        """Insert or replace nodes by `element_id`."""

    @abstractmethod
    async def upsert_edges(self, edges: Sequence[GraphEdge]) -> None:
        """Insert or replace edges by `(source_id, relation, target_id)`."""

    @abstractmethod
    async def delete_nodes(self, element_ids: Sequence[str]) -> None:
        """Remove nodes and every edge touching them (purge)."""

    @abstractmethod
    async def expand(
        self,
        element_ids: Sequence[str],
        depth: int,
        relations: Sequence[str] | None,
        as_of: int | None,
    ) -> Subgraph:
        """Every edge within `depth` hops of any of `element_ids`, either direction.

        One call for the whole batch. `relations` limits the edge types followed (None: all);
        `as_of` selects the edges valid then (None: now).
        """


class RelationalCapable(ABC):
    """The system of record: authoritative element states, chunks, edges, and the outbox."""

    @abstractmethod
    async def commit(self, batch: WriteBatch) -> None:
        """Write a whole batch atomically, with an outbox entry per derived store."""

    @abstractmethod
    async def latest_states(self, element_ids: Sequence[str]) -> dict[str, StoredState]:
        """The newest state of each id that has one (tombstones included)."""

    @abstractmethod
    async def fetch(self, element_ids: Sequence[str], as_of: int | None) -> dict[str, StoredState]:
        """For each id: its state as of `as_of` (None: now), in one query.

        The returned state carries `latest_sensitivity_rank` and `latest_scope` of the newest
        state too, so that clearance can require both to be visible.
        """

    @abstractmethod
    async def live_edges(self, element_ids: Sequence[str]) -> list[GraphEdge]:
        """Current edges that touch any of these ids (to close them on delete)."""

    @abstractmethod
    async def last_hlc(self) -> int:
        """The highest HLC stamped into the store (0 when empty)."""

    @abstractmethod
    async def pending(self, store: str, limit: int) -> list[OutboxItem]:
        """Outbox entries not yet applied to `store`, oldest first."""

    @abstractmethod
    async def acknowledge(self, store: str, items: Sequence[OutboxItem]) -> None:
        """Mark outbox entries as applied to `store`."""

    @abstractmethod
    async def load_chunks(self, state_keys: Sequence[tuple[str, int]]) -> list[ChunkRecord]:
        """The chunks (with embeddings and current validity) of these `(id, version)` states."""

    @abstractmethod
    async def load_edges(self, keys: Sequence[tuple[str, str, str]]) -> list[GraphEdge]:
        """The edges with these keys, with their current validity."""

    @abstractmethod
    async def counts(self) -> Mapping[str, int]:
        """Sizes for `stats`: states, elements, chunks, edges, pending outbox entries."""
