"""The write path: validate, skip unchanged content, stamp, commit, then fan out.

Order of work (docs/adr/0003-write-path-and-outbox.md):

1. Validate the whole batch (types, fields, relations and their endpoints).
2. Skip elements whose content hash equals their current state's.
3. Chunk and embed the changed knowledge assets; nothing has been written yet, so a failure
   here leaves every store as it was.
4. Stamp each new state with the HLC; its version is the previous one plus one.
5. Commit states, chunks (with embeddings), edges and one outbox entry per derived store in a
   single transaction of the system of record.
6. Apply the outbox to the vector, text and graph stores with idempotent upserts, then
   acknowledge it. An interrupted ingest leaves outbox entries behind; the next ingest (or
   `sync()`) applies them, so nothing is lost or duplicated.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from connectors.base import (
    Connector,
    GraphCapable,
    RelationalCapable,
    TextCapable,
    VectorCapable,
    backend_name,
)
from connectors.contract.records import OPEN, GraphEdge, GraphNode
from connectors.contract.system_of_record import ChunkRow, OutboxItem, StoredState, WriteBatch
from ontology import Element, KnowledgeAsset, Relation
from uda.embedding import Embedder
from uda.errors import (
    BackendUnavailableError,
    ConnectorError,
    EmbeddingModelMismatchError,
    StoresBehindError,
    UserError,
)
from uda.hlc import HybridLogicalClock, epoch_ms
from uda.query.deadlines import (
    DEFAULT_CALL_TIMEOUT_S,
    DEFAULT_WRITE_TIMEOUT_S,
    bounded,
    required_within,
)
from uda.query.filters import element_filter_values
from uda.query.online import OfflineStores
from uda.query.retries import NO_RETRIES
from uda.write.chunking import DEFAULT_MAX_TOKENS, chunk_text
from uda.write.validation import (
    ElementInput,
    RelationInput,
    check_endpoints,
    coerce_elements,
    coerce_relations,
)

Role = Literal["vector", "text", "graph"]
T = TypeVar("T")
_OUTBOX_PAGE = 1000


@dataclass(frozen=True, kw_only=True)
class IngestReport:
    """What an ingest or delete did."""

    written: int = 0
    unchanged: int = 0
    deleted: int = 0
    not_found: int = 0
    chunks: int = 0
    embedded: int = 0
    edges: int = 0
    edges_unchanged: int = 0
    hlc: int | None = None


@dataclass(frozen=True, kw_only=True)
class DerivedStore:
    """A connector in one role, fed from the outbox under its own name."""

    key: str
    role: Role
    connector: Connector


_ROLES: tuple[tuple[Role, type], ...] = (
    ("vector", VectorCapable),
    ("text", TextCapable),
    ("graph", GraphCapable),
)


def derived_stores(connectors: Sequence[Connector]) -> list[DerivedStore]:
    """Every (connector, role) pair that the write path must feed."""
    stores: list[DerivedStore] = []
    for connector in connectors:
        for role, capability in _ROLES:
            if isinstance(connector, capability):
                stores.append(
                    DerivedStore(key=f"{role}:{connector.name}", role=role, connector=connector)
                )
    keys = [s.key for s in stores]
    if len(set(keys)) != len(keys):
        raise ValueError(f"two connectors share a name in one role: {keys}")
    return stores


def state_of(element: Element, *, version: int, hlc: int, tombstone: bool = False) -> StoredState:
    """The stored form of an element's new state."""
    payload = element.model_dump(mode="json", exclude={"hlc", "version"})
    return StoredState(
        element_id=element.element_id,
        version=version,
        hlc=hlc,
        element_type=element.type_name(),
        name=element.name,
        sensitivity_rank=element.sensitivity.rank,
        scope=element.scope,
        timestamp_ms=epoch_ms(element.timestamp),
        tombstone=tombstone,
        content_hash=element.content_hash(),
        payload=payload,
        filter_values=element_filter_values(element),
        latest_sensitivity_rank=element.sensitivity.rank,
        latest_scope=element.scope,
    )


class Writer:
    """Ingests elements and relations into the system of record and the derived stores."""

    def __init__(
        self,
        *,
        system_of_record: RelationalCapable,
        stores: Sequence[DerivedStore],
        embedder: Embedder,
        clock: HybridLogicalClock,
        max_chunk_tokens: int = DEFAULT_MAX_TOKENS,
        write_timeout_s: float = DEFAULT_WRITE_TIMEOUT_S,
        call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S,
        offline: OfflineStores | None = None,
    ) -> None:
        self._sor = system_of_record
        self._stores = list(stores)
        self._embedder = embedder
        self._clock = clock
        self._max_chunk_tokens = max_chunk_tokens
        # Each page applied to a derived store must land within this: a hung store leaves
        # its entries in the outbox (`StoresBehindError`) instead of hanging the ingest.
        self._write_timeout_s = write_timeout_s
        # Each read of the system of record (the outbox, the latest states) must answer
        # within this: without it nothing can be written, so the ingest fails in seconds.
        self._call_timeout_s = call_timeout_s
        # Stores that could not connect when the client opened: connected by the first
        # write (or search) that reaches them, so their outbox drains once they answer.
        self._offline = offline or OfflineStores()
        # One writer at a time in this process: versions are read, then incremented.
        self._lock = asyncio.Lock()
        # Whether the store is known to hold this embedder's vectors (claimed on first write).
        self._model_checked = False

    async def ingest(
        self, elements: Iterable[ElementInput] = (), relations: Iterable[RelationInput] = ()
    ) -> IngestReport:
        """Write new states of `elements` and the `relations` between them (see module doc)."""
        typed = coerce_elements(elements)
        edges = coerce_relations(relations)
        async with self._lock:
            await self._sync_locked()
            endpoint_ids = {r.source_id for r in edges} | {r.target_id for r in edges}
            batch_ids = {e.element_id for e in typed}
            latest = await self._record(
                lambda: self._sor.latest_states(sorted(batch_ids | endpoint_ids))
            )
            types_by_id = {eid: s.element_type for eid, s in latest.items() if not s.tombstone}
            types_by_id.update({e.element_id: e.type_name() for e in typed})
            check_endpoints(edges, types_by_id)

            changed = [e for e in typed if _is_new_content(e, latest.get(e.element_id))]
            if changed:
                await self._claim_embedding_model()
            known = await self._previous_embeddings(changed, latest)
            chunk_texts, embedded = await asyncio.to_thread(self._chunk_and_embed, changed, known)
            existing_edges = await self._record(
                lambda: self._sor.load_edges([r.key for r in edges])
            )
            live = {e.key for e in existing_edges if e.valid_to == OPEN}
            new_edges = [r for r in edges if r.key not in live]
            if not changed and not new_edges:
                return IngestReport(unchanged=len(typed), edges_unchanged=len(edges))

            states: list[StoredState] = []
            chunks: list[ChunkRow] = []
            retire: list[tuple[str, int, int]] = []
            for element in changed:
                hlc = self._clock.now()
                previous = latest.get(element.element_id)
                version = previous.version + 1 if previous else 1
                states.append(state_of(element, version=version, hlc=hlc))
                if previous is not None:
                    retire.append((element.element_id, previous.version, hlc))
                for index, (text, vector) in enumerate(chunk_texts.get(element.element_id, [])):
                    chunks.append(
                        ChunkRow(
                            element_id=element.element_id,
                            version=version,
                            index=index,
                            text=text,
                            embedding=vector,
                        )
                    )
            edge_hlc = self._clock.now() if new_edges else 0
            graph_edges = [_edge(r, edge_hlc) for r in new_edges]
            await self._commit(
                WriteBatch(
                    states=states,
                    chunks=chunks,
                    retire=retire,
                    edges=graph_edges,
                    stores=[s.key for s in self._stores],
                    hlc=self._clock.last,
                )
            )
            report = IngestReport(
                written=len(changed),
                unchanged=len(typed) - len(changed),
                chunks=len(chunks),
                embedded=embedded,
                edges=len(new_edges),
                edges_unchanged=len(edges) - len(new_edges),
                hlc=self._clock.last,
            )
            try:
                await self._sync_locked()
            except StoresBehindError as exc:
                exc.report = report
                raise
        return report

    async def delete(self, element_ids: Iterable[str]) -> IngestReport:
        """Tombstone elements: a new state that hides them, and their edges closed."""
        ids = list(dict.fromkeys(element_ids))
        async with self._lock:
            await self._sync_locked()
            latest = await self._record(lambda: self._sor.latest_states(ids))
            alive = [latest[i] for i in ids if i in latest and not latest[i].tombstone]
            if not alive:
                return IngestReport(not_found=len(ids))
            states: list[StoredState] = []
            retire: list[tuple[str, int, int]] = []
            for previous in alive:
                hlc = self._clock.now()
                states.append(
                    StoredState(
                        element_id=previous.element_id,
                        version=previous.version + 1,
                        hlc=hlc,
                        element_type=previous.element_type,
                        name=previous.name,
                        sensitivity_rank=previous.sensitivity_rank,
                        scope=previous.scope,
                        timestamp_ms=previous.timestamp_ms,
                        tombstone=True,
                        content_hash="",
                        payload=previous.payload,
                        filter_values=previous.filter_values,
                    )
                )
                retire.append((previous.element_id, previous.version, hlc))
            close_hlc = self._clock.now()
            closing = [
                GraphEdge(
                    source_id=e.source_id,
                    relation=e.relation,
                    target_id=e.target_id,
                    valid_from=e.valid_from,
                    valid_to=close_hlc,
                )
                for e in await self._record(
                    lambda: self._sor.live_edges([s.element_id for s in alive])
                )
            ]
            await self._commit(
                WriteBatch(
                    states=states,
                    retire=retire,
                    edges=closing,
                    stores=[s.key for s in self._stores],
                    hlc=self._clock.last,
                )
            )
            await self._sync_locked()
        return IngestReport(
            deleted=len(alive),
            not_found=len(ids) - len(alive),
            edges=len(closing),
            hlc=self._clock.last,
        )

    async def sync(self) -> dict[str, int]:
        """Apply every pending outbox entry to its store; returns entries applied per store."""
        async with self._lock:
            return await self._sync_locked()

    async def _sync_locked(self) -> dict[str, int]:
        """Drain every store's outbox; each store on its own, so one down stops no other.

        Raises:
            StoresBehindError: stores that failed, each with its reason (their entries stay
                in the outbox for the next sync).
        """
        results = await asyncio.gather(
            *(self._drain(store) for store in self._stores), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BackendUnavailableError):
                raise result  # the system of record itself: the outbox cannot even be read
        behind: dict[str, str] = {}
        applied: dict[str, int] = {}
        for store, result in zip(self._stores, results, strict=True):
            if isinstance(result, int):
                applied[store.key] = result
            elif isinstance(result, Exception) and not isinstance(result, UserError):
                behind[store.key] = f"{type(result).__name__}: {result}".splitlines()[0]
            else:
                raise result  # cancellation, or a mistake that is not the store's
        if behind:
            raise StoresBehindError(behind)
        return applied

    async def _drain(self, store: DerivedStore) -> int:
        applied = 0
        while items := await self._record(lambda: self._sor.pending(store.key, _OUTBOX_PAGE)):
            try:
                await bounded(self._apply(store, items), self._write_timeout_s)
            except TimeoutError:
                raise ConnectorError(
                    store.key, f"no answer within {self._write_timeout_s:g} s"
                ) from None
            await self._record(lambda: self._sor.acknowledge(store.key, items))
            applied += len(items)
        return applied

    async def _record(self, call: Callable[[], Awaitable[T]]) -> T:
        """A read (or an acknowledgement) of the system of record, within a call's deadline.

        Raises:
            BackendUnavailableError: naming the system of record, when it fails or is late
                (a dead server would otherwise keep the ingest waiting for its pool's 30 s).
        """
        return await required_within(self._sor_name, call, self._call_timeout_s)

    async def _commit(self, batch: WriteBatch) -> None:
        """Commit a batch within the write deadline: a big batch takes longer than a read.

        Never retried: a commit whose answer was lost may have landed (running the ingest
        again is what completes it, as after any interruption).
        """
        await required_within(
            self._sor_name, lambda: self._sor.commit(batch), self._write_timeout_s, NO_RETRIES
        )

    @property
    def _sor_name(self) -> str:
        return backend_name(self._sor)

    async def _apply(self, store: DerivedStore, items: Sequence[OutboxItem]) -> None:
        state_keys = [(str(i.key[0]), int(i.key[1])) for i in items if i.kind == "state"]
        edge_keys = [
            (str(i.key[0]), str(i.key[1]), str(i.key[2])) for i in items if i.kind == "edge"
        ]
        connector = store.connector
        await self._offline.connected(connector)
        if store.role in ("vector", "text") and state_keys:
            with_vectors = store.role == "vector"
            chunks = await self._record(
                lambda: self._sor.load_chunks(state_keys, embeddings=with_vectors)
            )
            if chunks and isinstance(connector, VectorCapable) and store.role == "vector":
                await connector.upsert_chunks(chunks)
            elif chunks and isinstance(connector, TextCapable) and store.role == "text":
                await connector.upsert_text_chunks(chunks)
        if store.role == "graph" and isinstance(connector, GraphCapable):
            if state_keys:
                # Heads: a node needs its type only, never the payload.
                states = await self._record(
                    lambda: self._sor.fetch_heads(
                        sorted({k[0] for k in state_keys}), None, filter_values=False
                    )
                )
                nodes = [
                    GraphNode(element_id=s.element_id, element_type=s.element_type)
                    for s in states.values()
                ]
                await connector.upsert_nodes(nodes)
            if edge_keys:
                await connector.upsert_edges(
                    await self._record(lambda: self._sor.load_edges(edge_keys))
                )

    async def _claim_embedding_model(self) -> None:
        """Record this embedder's model in the store, or refuse if another one made it."""
        if self._model_checked:
            return
        mine = await asyncio.to_thread(lambda: self._embedder.fingerprint)
        recorded = await self._record(lambda: self._sor.claim_embedding_model(mine))
        if recorded != mine:
            raise EmbeddingModelMismatchError(recorded, mine)
        self._model_checked = True

    async def _previous_embeddings(
        self, elements: Sequence[Element], latest: Mapping[str, StoredState]
    ) -> dict[str, list[float]]:
        """Embeddings of the previous states' chunks, by the exact text that was embedded."""
        keys = [
            (e.element_id, latest[e.element_id].version)
            for e in elements
            if isinstance(e, KnowledgeAsset) and e.element_id in latest
        ]
        if not keys:
            return {}
        return {
            _embedded_text(chunk.name, chunk.text): list(chunk.embedding)
            for chunk in await self._record(lambda: self._sor.load_chunks(keys))
            if chunk.embedding is not None
        }

    def _chunk_and_embed(
        self, elements: Sequence[Element], known: Mapping[str, list[float]]
    ) -> tuple[dict[str, list[tuple[str, list[float]]]], int]:
        """Chunks of each element with embeddings; only texts not in `known` are embedded.

        Returns the chunks by element id and how many were embedded (the rest were reused).
        """
        pieces: list[tuple[str, str, str]] = []  # (element id, piece, embedded text)
        for element in elements:
            if isinstance(element, KnowledgeAsset):
                for piece in chunk_text(element.text, self._max_chunk_tokens):
                    pieces.append((element.element_id, piece, _embedded_text(element.name, piece)))
        missing = list(dict.fromkeys(t for _, _, t in pieces if t not in known))
        vectors = dict(zip(missing, self._embedder.embed_documents(missing), strict=True))
        out: dict[str, list[tuple[str, list[float]]]] = {}
        for element_id, piece, text in pieces:
            vector = known[text] if text in known else vectors[text].tolist()
            out.setdefault(element_id, []).append((piece, vector))
        return out, len(missing)


def _embedded_text(name: str, piece: str) -> str:
    # The name prefixes every chunk: titles carry much of the meaning.
    return f"{name}\n{piece}"


def _is_new_content(element: Element, latest: StoredState | None) -> bool:
    return latest is None or latest.tombstone or latest.content_hash != element.content_hash()


def _edge(relation: Relation, hlc: int) -> GraphEdge:
    return GraphEdge(
        source_id=relation.source_id,
        relation=relation.relation,
        target_id=relation.target_id,
        valid_from=hlc,
    )
