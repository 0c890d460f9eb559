"""Chroma: the embedded vector store (`PersistentClient`), and Chroma server (`HttpClient`).

Embeddings are always passed in: with `embedding_function=None` Chroma never tries to fetch a
model. Filtered search is Chroma's slow path, so the filter is pushed into the query (`where`)
instead of filtering a fixed top-k afterwards, which would starve the candidate pool.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

from connectors.base import Connector, VectorCapable
from connectors.records import OPEN, ChunkHit, ChunkRecord, SearchFilter
from uda.errors import ConnectorError
from uda.filters import ORDERED_OPS, Op

T = TypeVar("T")

_COLLECTION = "uda_chunks"
_BATCH = 2000  # stays under Chroma's maximum batch size
_OVERFETCH = 2  # unfiltered candidates fetched per wanted hit before the filtered query
_NO_SCOPE = ""  # Chroma metadata cannot hold None
_CHROMA_OPS = {
    Op.EQ: "$eq",
    Op.IN: "$in",
    Op.GT: "$gt",
    Op.GTE: "$gte",
    Op.LT: "$lt",
    Op.LTE: "$lte",
}
_RESERVED = ("element_id", "version", "etype", "sens", "scope", "valid_from", "valid_to")


def _metadata(chunk: ChunkRecord) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "element_id": chunk.element_id,
        "version": chunk.version,
        "etype": chunk.element_type,
        "sens": chunk.sensitivity_rank,
        "scope": chunk.scope or _NO_SCOPE,
        "valid_from": chunk.valid_from,
        "valid_to": chunk.valid_to,
    }
    # Filterable fields get a prefix so that they can never collide with the bookkeeping keys.
    meta.update({f"f_{k}": v for k, v in chunk.filter_values.items()})
    return meta


def _hits(result: Any) -> list[tuple[ChunkHit, Mapping[str, Any]]]:
    ids: list[str] = result["ids"][0]
    metas: list[Mapping[str, Any]] = result["metadatas"][0]
    docs: list[str | None] = result["documents"][0]
    distances: list[float] = result["distances"][0]
    return [
        (
            ChunkHit(
                chunk_id=cid,
                element_id=str(meta["element_id"]),
                version=int(meta["version"]),
                text=doc or "",
                score=1.0 - float(dist),
            ),
            meta,
        )
        for cid, meta, doc, dist in zip(ids, metas, docs, distances, strict=True)
    ]


def _allows(search_filter: SearchFilter, meta: Mapping[str, Any]) -> bool:
    """The filter's reference semantics applied to a chunk's Chroma metadata."""
    chunk = ChunkRecord(
        chunk_id="",
        element_id=str(meta["element_id"]),
        version=int(meta["version"]),
        index=0,
        text="",
        embedding=None,
        element_type=str(meta["etype"]),
        name="",
        sensitivity_rank=int(meta["sens"]),
        scope=str(meta["scope"]) or None,
        valid_from=int(meta["valid_from"]),
        valid_to=int(meta["valid_to"]),
        filter_values={k[2:]: v for k, v in meta.items() if k.startswith("f_")},
    )
    return search_filter.allows_chunk(chunk)


def compile_where(search_filter: SearchFilter) -> dict[str, Any]:
    """The Chroma `where` clause for a pushdown filter."""
    clauses: list[dict[str, Any]] = [{"sens": {"$lte": search_filter.max_sensitivity_rank}}]
    if not search_filter.all_projects:
        clauses.append({"scope": {"$in": [_NO_SCOPE, *search_filter.projects]}})
    if search_filter.as_of is None:
        clauses.append({"valid_to": {"$eq": OPEN}})
    else:
        clauses.append({"valid_from": {"$lte": search_filter.as_of}})
        clauses.append({"valid_to": {"$gt": search_filter.as_of}})
    if search_filter.element_types is not None:
        clauses.append({"etype": {"$in": list(search_filter.element_types)}})
    for predicate in search_filter.predicates:
        op = _CHROMA_OPS.get(predicate.op)
        if op is None or (predicate.op in ORDERED_OPS and isinstance(predicate.value, str)):
            # Chroma orders numbers only: string ranges are applied to the fetched metadata.
            continue
        value = list(predicate.value) if isinstance(predicate.value, tuple) else predicate.value
        clauses.append({f"f_{predicate.field}": {op: value}})
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


class ChromaConnector(Connector, VectorCapable):
    """Chunk vectors in one Chroma collection (cosine space).

    Args:
        path: folder of the embedded `PersistentClient`; or
        host, port: a Chroma server (`chroma run`), reached with `HttpClient`.
    """

    name = "chroma"

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        host: str | None = None,
        port: int | None = None,
        collection: str = _COLLECTION,
    ) -> None:
        if (path is None) == (host is None):
            raise ValueError("give either path (embedded) or host (server)")
        self._path = Path(path) if path is not None else None
        self._host = host
        self._port = port
        self._collection_name = collection
        self._client: Any = None
        self._collection: Any = None

    async def connect(self) -> None:
        """Open the client and the collection (created on first use)."""
        if self._collection is not None:
            return

        def open_client() -> None:
            import chromadb
            from chromadb.config import Settings

            settings = Settings(anonymized_telemetry=False)
            if self._path is not None:
                self._path.mkdir(parents=True, exist_ok=True)
                client = chromadb.PersistentClient(path=str(self._path), settings=settings)
            else:
                client = chromadb.HttpClient(
                    host=self._host or "127.0.0.1", port=self._port or 8000, settings=settings
                )
            self._client = client
            self._collection = client.get_or_create_collection(
                self._collection_name,
                embedding_function=None,
                metadata={"hnsw:space": "cosine"},
            )

        await self._run(open_client)

    async def close(self) -> None:
        """Drop the client (the embedded client persists as it writes)."""
        self._collection = None
        self._client = None

    async def _run(self, fn: Callable[[], T]) -> T:
        try:
            return await asyncio.to_thread(fn)
        except ConnectorError:
            raise
        except Exception as exc:  # Chroma raises many unrelated types; name them all ours.
            raise ConnectorError(self.name, f"{type(exc).__name__}: {exc}") from exc

    def _require(self) -> Any:
        if self._collection is None:
            raise ConnectorError(self.name, "not connected: call connect() first")
        return self._collection

    async def upsert_chunks(self, chunks: Sequence[ChunkRecord]) -> None:
        """Add new chunks; update only the metadata of chunks already stored.

        A chunk id names one version's chunk, so its embedding never changes. Re-sending the
        embedding of a stored id makes hnswlib re-link that point, which was seen to leave
        freshly added points unreachable by queries; a metadata-only update does not touch
        the graph.
        """
        missing = [c.chunk_id for c in chunks if c.embedding is None]
        if missing:
            raise ConnectorError(self.name, f"chunks without embeddings: {missing[:3]}")

        def write() -> None:
            collection = self._require()
            for start in range(0, len(chunks), _BATCH):
                part = chunks[start : start + _BATCH]
                stored = set(collection.get(ids=[c.chunk_id for c in part], include=[])["ids"])
                fresh = [c for c in part if c.chunk_id not in stored]
                known = [c for c in part if c.chunk_id in stored]
                if fresh:
                    collection.add(
                        ids=[c.chunk_id for c in fresh],
                        embeddings=[list(cast("Sequence[float]", c.embedding)) for c in fresh],
                        metadatas=[_metadata(c) for c in fresh],
                        documents=[c.text for c in fresh],
                    )
                if known:
                    collection.update(
                        ids=[c.chunk_id for c in known],
                        metadatas=[_metadata(c) for c in known],
                    )

        await self._run(write)

    async def delete_chunks(self, element_ids: Sequence[str]) -> None:
        """Delete every chunk of the elements."""
        if not element_ids:
            return
        await self._run(
            lambda: self._require().delete(where={"element_id": {"$in": list(element_ids)}})
        )

    async def delete_chunk_ids(self, chunk_ids: Sequence[str]) -> None:
        """Delete chunks by id."""

        def delete() -> None:
            collection = self._require()
            for start in range(0, len(chunk_ids), _BATCH):
                collection.delete(ids=list(chunk_ids[start : start + _BATCH]))

        await self._run(delete)

    async def chunk_states(self) -> dict[str, int]:
        """Every stored chunk id with its `valid_to`, read page by page."""

        def read() -> dict[str, int]:
            collection = self._require()
            states: dict[str, int] = {}
            for offset in itertools.count(0, _BATCH):
                page = collection.get(include=["metadatas"], limit=_BATCH, offset=offset)
                ids: list[str] = page["ids"]
                metas: list[Mapping[str, Any]] = page["metadatas"]
                states.update(
                    (cid, int(meta["valid_to"])) for cid, meta in zip(ids, metas, strict=True)
                )
                if len(ids) < _BATCH:
                    break
            return states

        return await self._run(read)

    async def vector_search(
        self, embedding: Sequence[float], k: int, search_filter: SearchFilter
    ) -> list[ChunkHit]:
        """Nearest chunks passing the filter; score = 1 - cosine distance.

        Chroma's filtered query is its slow path (several times the unfiltered one), so the
        unfiltered index is over-fetched first and the filter applied to the returned
        metadata; only when too few pass does the filtered query run. Either way the answer
        is the top `k` chunks that pass, or all of them.
        """
        if search_filter.element_types is not None and not search_filter.element_types:
            return []  # no type may match (and Chroma rejects an empty `$in`)
        where = compile_where(search_filter)

        def query() -> list[ChunkHit]:
            collection = self._require()
            fetch = k * _OVERFETCH
            result = collection.query(
                query_embeddings=[list(embedding)],
                n_results=fetch,
                include=["metadatas", "documents", "distances"],
            )
            hits = _hits(result)
            passing = [hit for hit, meta in hits if _allows(search_filter, meta)]
            if len(passing) >= k or len(hits) < fetch:
                return passing[:k]  # enough, or the whole collection was seen
            # The filtered query; `where` may be looser than the filter (string ranges), so
            # widen it until k hits pass in full or the matching chunks run out.
            wanted = k
            while True:
                result = collection.query(
                    query_embeddings=[list(embedding)],
                    n_results=wanted,
                    where=where,
                    include=["metadatas", "documents", "distances"],
                )
                hits = _hits(result)
                passing = [hit for hit, meta in hits if _allows(search_filter, meta)]
                if len(passing) >= k or len(hits) < wanted:
                    return passing[:k]
                wanted *= 4

        return await self._run(query)

    async def count(self) -> int:
        """Number of chunks stored (for `stats` and checks)."""
        return await self._run(lambda: int(self._require().count()))
