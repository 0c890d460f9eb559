"""The connector base class and the capability mixins.

A connector says what it can do by listing capabilities among its bases
(`class ChromaConnector(Connector, VectorCapable)`); the planner selects connectors with
`isinstance`, never by product name. Capabilities are small ABCs with abstract members only.
All members are coroutines: connectors over blocking libraries run them in a worker thread.
"""

from __future__ import annotations

import secrets
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar, Literal

from connectors.contract.aggregation import StateAggregates, StateAggregation
from connectors.contract.errors import MissingCapabilityError
from connectors.contract.graph_shape import GraphShape, ShapeClearance
from connectors.contract.records import (
    ChunkHit,
    ChunkRecord,
    GraphEdge,
    GraphNode,
    SearchFilter,
    Subgraph,
)
from connectors.contract.saved_queries import SavedQueryRow
from connectors.contract.selection import StateSelection
from connectors.contract.system_of_record import (
    OutboxItem,
    StateHead,
    StoredState,
    WriteBatch,
)

_PROCESS_SECRET = secrets.token_bytes(32)


class Connector(ABC):
    """A backend connection. `name` equals the connector's registry key."""

    name: ClassVar[str]

    @abstractmethod
    async def connect(self) -> None:
        """Open the connection (create schemas, load persisted state). Idempotent."""

    @abstractmethod
    async def close(self) -> None:
        """Release the connection; persist what must survive a restart. Idempotent."""

    @property
    def shared_across_processes(self) -> bool:
        """Whether several processes may use this store at once, each seeing the others' writes.

        A server (PostgreSQL, an ArcadeDB or Chroma server) and a SQLite file are; a store held
        in this process's memory (networkx, Chroma's PersistentClient, an embedded ArcadeDB) is
        not: another process would read a stale copy and its writes could undo this one's.
        `uda serve --workers` runs several processes only over stores that are. False unless a
        connector says otherwise: the safe answer for a store nobody has checked.
        """
        return False


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

    @abstractmethod
    async def vector_scores(
        self, embedding: Sequence[float], element_ids: Sequence[str], search_filter: SearchFilter
    ) -> list[ChunkHit]:
        """Every chunk of these elements that passes the filter, score = cosine similarity.

        Best first. For candidates another leg found (graph expansion reaches elements the
        nearest-neighbour search did not return): one batched call for all of them, exact,
        however many ids; unknown ids are no error and score nothing.
        """

    @abstractmethod
    async def chunk_states(self) -> dict[str, int]:
        """Every stored chunk id with its `valid_to` (for `check`; reads the whole store)."""

    @abstractmethod
    async def delete_chunk_ids(self, chunk_ids: Sequence[str]) -> None:
        """Remove these chunks, whatever element they claim (repair of extras)."""


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

    @abstractmethod
    async def text_chunk_states(self) -> dict[str, int]:
        """Every stored chunk id with its `valid_to` (for `check`; reads the whole store)."""

    @abstractmethod
    async def delete_text_chunks(self, chunk_ids: Sequence[str]) -> None:
        """Remove these chunks from the text index (repair of extras)."""

    @abstractmethod
    async def text_index_drift(self) -> int:
        """How many entries of the search index disagree with the stored chunks.

        A store whose index is derived from its chunks by a separate structure (SQLite's
        FTS5 table) can lose or keep index entries behind the chunks' backs; 0 for a store
        whose index cannot drift.
        """

    @abstractmethod
    async def rebuild_text_index(self) -> None:
        """Rebuild the search index from the stored chunks (a no-op where it cannot drift)."""


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
        backward_hops: int | None = None,
    ) -> Subgraph:
        """Every edge within `depth` hops of any of `element_ids`.

        One call for the whole batch. `relations` limits the edge types followed (None: all);
        `as_of` selects the edges valid then (None: now). Hop `i` (0-based) follows edges
        from target to source as well as from source to target while `i < backward_hops`
        (None: at every hop), and only from source to target after that
        (`connectors.contract.records.walks_back`): with 1, a document reaches its repository
        but not the repository's other documents.
        """

    @abstractmethod
    async def edge_states(self) -> dict[tuple[str, str, str], tuple[int, int]]:
        """Every stored edge key with its `(valid_from, valid_to)` (for `check`)."""

    @abstractmethod
    async def node_ids(self) -> set[str]:
        """Every stored node id (for `check`)."""

    @abstractmethod
    async def delete_edges(self, keys: Sequence[tuple[str, str, str]]) -> None:
        """Remove these edges, keeping their nodes (repair of extras)."""


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

    async def fetch_heads(
        self, element_ids: Sequence[str], as_of: int | None, *, filter_values: bool = True
    ) -> dict[str, StateHead]:
        """`fetch`, but each state without its payload (`StateHead`), in one query.

        Phase 3 reads the heads of every candidate and every node its graph expansion
        reached (hundreds), ranks on them, and reads whole states for the page it returns
        (`fetch_versions`). A store overrides this with a query that skips the payload (an
        index-only lookup, ADR 51); this default derives it from `fetch`. With
        `filter_values=False` a store may leave the filter values unread (`UNREAD`): a
        search whose filter has no value predicate never looks at them.
        """
        states = await self.fetch(element_ids, as_of)
        return {eid: StateHead.of(state) for eid, state in states.items()}

    async def fetch_versions(self, heads: Sequence[StateHead]) -> dict[str, StoredState]:
        """The whole state of each head's element at exactly the head's version.

        With the newest state's clearance (`latest_*`) as it is now, so that the caller can
        check visibility again. A version that no longer exists is left out. A store
        overrides this with one lookup by (element, version); this default reads the
        current states and, for heads whose element has changed since, their states as of
        the heads' stamps (a state is valid from its `hlc`).
        """
        if not heads:
            return {}
        found = await self.fetch([h.element_id for h in heads], None)
        out = {h.element_id: found[h.element_id] for h in heads if _same(found, h)}
        stale: dict[int, list[StateHead]] = {}
        for head in heads:
            if head.element_id not in out:
                stale.setdefault(head.hlc, []).append(head)
        for hlc, group in stale.items():
            older = await self.fetch([h.element_id for h in group], hlc)
            out.update({h.element_id: older[h.element_id] for h in group if _same(older, h)})
        return out

    async def chunk_texts(self, chunks: Sequence[tuple[str, int, str]]) -> dict[str, str]:
        """The text of each chunk, by chunk id; a chunk not stored is left out.

        `chunks` are (element id, version, chunk id). The retrieval legs may return hits
        without text (`ChunkHit.text` None, ADR 53); phase 3 reads here, in one query, the
        text of the chunks it shows or matches the query against. This default reads the
        states' chunks (`load_chunks`); a store overrides it with a lookup of these alone.
        """
        wanted = {cid for _, _, cid in chunks}
        if not wanted:
            return {}
        states = list(dict.fromkeys((eid, int(version)) for eid, version, _ in chunks))
        loaded = await self.load_chunks(states, embeddings=False)
        return {c.chunk_id: c.text for c in loaded if c.chunk_id in wanted}

    @abstractmethod
    async def select_states(self, selection: StateSelection) -> list[StoredState]:
        """One page of a structured retrieval (`connectors.contract.selection`), in one query.

        States valid at the filter's `as_of`, not tombstoned, passing what the store can
        apply of the filter (clearance and types at least; a store may apply less, never
        more), strictly after `selection.after` in `selection.order`, at most
        `selection.limit`, in that order. Each carries its newest state's clearance, as
        `fetch` returns it.
        """

    async def save_queries(self, rows: Sequence[SavedQueryRow], older_than_ms: int) -> None:
        """Keep these queries and forget those created before `older_than_ms` (0: none).

        One transaction; ids are unique, so nothing is replaced. This default keeps nothing:
        a store that persists nothing cannot be asked for a saved query later (`load_query`
        then finds none).
        """
        del rows, older_than_ms

    async def load_query(self, query_id: str) -> SavedQueryRow | None:
        """The saved query with this id, or None."""
        del query_id
        return None

    async def instance_secret(self) -> bytes:
        """A random 32-byte secret, made once per store and the same for all its clients.

        Keys the MACs of search cursors, so that a cursor works from any client of the
        store and after a restart. This default lives only as long as the process: a store
        overrides it with one it keeps.
        """
        return _PROCESS_SECRET

    async def embedding_model(self) -> str | None:
        """The fingerprint of the model that made the store's vectors; None before the first.

        A store keeps one model's vectors: another model's query vectors would be compared
        with them and rank nonsense. This default keeps nothing (every model is accepted).
        """
        return None

    async def claim_embedding_model(self, fingerprint: str) -> str:
        """Record `fingerprint` as the store's model unless one is recorded; the recorded one.

        Atomic: of two first writers with different models, one wins and the other learns
        it. This default records nothing and returns `fingerprint`.
        """
        return fingerprint

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
    async def load_chunks(
        self, state_keys: Sequence[tuple[str, int]], *, embeddings: bool = True
    ) -> list[ChunkRecord]:
        """The chunks (with embeddings and current validity) of these `(id, version)` states.

        `embeddings=False`: each record's embedding is None (for a store that keeps no
        vectors: a vector is the largest column of a chunk, and decoding it the costliest).
        """

    @abstractmethod
    async def load_edges(self, keys: Sequence[tuple[str, str, str]]) -> list[GraphEdge]:
        """The edges with these keys, with their current validity."""

    @abstractmethod
    async def counts(self) -> Mapping[str, int]:
        """Sizes for `stats`: states, elements, chunks, edges, pending outbox entries."""

    # What every derived store should hold, each in one query (uda/write/consistency.py).
    @abstractmethod
    async def expected_chunks(self) -> dict[str, int]:
        """Every chunk id with the `valid_to` of its state: the vector and text stores' due."""

    @abstractmethod
    async def expected_edges(self) -> dict[tuple[str, str, str], tuple[int, int]]:
        """Every edge key with its `(valid_from, valid_to)`: the graph stores' due."""

    @abstractmethod
    async def live_element_ids(self, prefix: str) -> list[str]:
        """Ids of the elements that exist now (not tombstoned) and start with `prefix`."""

    @abstractmethod
    async def graph_shape(
        self, asset_types: Sequence[str], clearance: ShapeClearance
    ) -> GraphShape:
        """The current graph's shape as `clearance` sees it (`GRAPH_SHAPE_SQL`), one query.

        Args:
            asset_types: the element types that count as knowledge assets.
            clearance: whose view: only states and edges it may see count.
        """

    @abstractmethod
    async def bridges(
        self, asset_types: Sequence[str], clearance: ShapeClearance, widest: int
    ) -> list[str]:
        """Ids of the nodes adjacent to two to `widest` assets `clearance` sees, sorted.

        `BRIDGES_SQL`, one query: what `uda tune` samples its pseudo-queries from.
        """

    @abstractmethod
    async def bridge_assets(
        self, nodes: Sequence[str], asset_types: Sequence[str], clearance: ShapeClearance
    ) -> dict[str, list[str]]:
        """The assets adjacent to each of `nodes` that `clearance` sees (`BRIDGE_ASSETS_SQL`).

        One query; a node with no such asset is left out.
        """

    @abstractmethod
    async def tuning(self) -> str | None:
        """The settings `uda tune` recorded last (a JSON document), None before it ran."""

    @abstractmethod
    async def record_tuning(self, document: str | None) -> None:
        """Keep `document` as the store's tuning, replacing the one before (None: forget it)."""

    @abstractmethod
    async def latest_versions(self) -> dict[str, int]:
        """Every element id (tombstoned ones too: they stay graph nodes) and its newest version."""

    @abstractmethod
    async def pending_counts(self) -> dict[str, int]:
        """Outbox entries not yet applied, per store (stores with none are left out)."""

    @abstractmethod
    async def enqueue(
        self, store: str, kind: Literal["state", "edge"], keys: Sequence[tuple[str | int, ...]]
    ) -> None:
        """Add outbox entries for `store`: `(element_id, version)` states or edge keys.

        The next drain re-sends them, exactly as after an interrupted write (repair).
        """

    async def aggregate_states(self, aggregation: StateAggregation) -> StateAggregates | None:
        """Counts (and a metric) by group, in one statement (`connectors.contract.aggregation`).

        None when the store cannot answer exactly what the planner's reference would count;
        the planner then counts in Python. This default always says None.
        """
        del aggregation
        return None


def _same(states: Mapping[str, StoredState], head: StateHead) -> bool:
    """Whether `states` holds the head's element at the head's version."""
    state = states.get(head.element_id)
    return state is not None and state.version == head.version


def backend_name(backend: object) -> str:
    """How errors, logs and degraded flags name a backend: its `name`, else its class."""
    return str(getattr(backend, "name", type(backend).__name__))


def system_of_record(connectors: Iterable[Connector]) -> RelationalCapable:
    """The profile's system of record: its first RelationalCapable connector.

    Every reader and writer chooses it here, so that clearance is always enforced against
    the same store.

    Raises:
        MissingCapabilityError: no connector is RelationalCapable (naming the connectors).
    """
    connectors = list(connectors)
    for connector in connectors:
        if isinstance(connector, RelationalCapable):
            return connector
    raise MissingCapabilityError(
        "the profile has no RelationalCapable connector to be the system of record",
        field="connectors",
        value=[c.name for c in connectors],
    )
