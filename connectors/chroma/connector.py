"""Chroma: the embedded vector store (`PersistentClient`), and Chroma server (`HttpClient`).

Embeddings are always passed in: with `embedding_function=None` Chroma never tries to fetch a
model. The embedded store keeps a chunk directory beside the collection (filter fields in
SQLite, `connectors.chroma.directory`): Chroma holds ids and vectors only, a search asks it
for ids and distances only, and its hits carry no text (ADR 16, 52, 53). While the store is
small, a search scans the directory's copy of the vectors exactly instead of asking Chroma's
HNSW index (`connectors.chroma.flat`, ADR 62). Against a Chroma
server, which may have other writers, the filter is applied to the metadata Chroma returns,
and pushed into the query (`where`) when too few pass, instead of filtering a fixed top-k,
which would starve the candidate pool.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np

from connectors.base import Connector, VectorCapable
from connectors.chroma.directory import (
    ChunkDirectory,
    all_ids,
    open_directory,
    record_from_metadata,
)
from connectors.chroma.directory_search import (
    ChromaNearest,
    Nearest,
    PassRates,
    hits_of,
    passing_hits,
    search_directory,
)
from connectors.chroma.flat import FLAT_LIMIT, FlatIndex, FlatNearest
from connectors.chroma.where import NO_SCOPE, compile_where
from connectors.contract.errors import ConnectorError
from connectors.contract.records import ChunkHit, ChunkRecord, SearchFilter

T = TypeVar("T")

_COLLECTION = "uda_chunks"
_BATCH = 2000  # stays under Chroma's maximum batch size
_OVERFETCH = 2  # unfiltered candidates fetched per wanted hit before the filtered query
# HNSW's candidate list per query. Chroma's default (100) equals the 100 ids a search asks
# for, and then misses some of the true nearest: on a 2,020-chunk MiniLM collection (the
# hipporag_musique passages) recall@100 was 0.985 on average and 0.93 at worst, and which
# ones were missed changed each time the store was opened (Chroma rebuilds part of the
# index on open). At 400: 1.000 on both that collection and 100k synthetic chunks, for
# +0.45 ms a query at 100k (ADR 49).
EF_SEARCH = 400
UNUSABLE = -1  # the `valid_to` reported for a vector that has no directory row
_RESERVED = ("element_id", "version", "etype", "sens", "scope", "valid_from", "valid_to")


def _metadata(chunk: ChunkRecord) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "element_id": chunk.element_id,
        "version": chunk.version,
        "etype": chunk.element_type,
        "sens": chunk.sensitivity_rank,
        "scope": chunk.scope or NO_SCOPE,
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


def _cosine(query: Sequence[float], stored: Sequence[float]) -> float:
    """Cosine similarity, as Chroma's cosine space computes it (1 - distance)."""
    a = np.asarray(query, dtype=np.float64)
    b = np.asarray(stored, dtype=np.float64)
    norms = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / norms if norms else 0.0


def _allows(search_filter: SearchFilter, meta: Mapping[str, Any]) -> bool:
    """The filter's reference semantics applied to a chunk's Chroma metadata."""
    return search_filter.allows_chunk(record_from_metadata("", meta, ""))


class ChromaConnector(Connector, VectorCapable):
    """Chunk vectors in one Chroma collection (cosine space).

    Args:
        path: folder of the embedded `PersistentClient`; or
        host, port: a Chroma server (`chroma run`), reached with `HttpClient`.
        flat_limit: the embedded store searches its vectors exactly, in memory, while it
            holds at most this many chunks (`connectors.chroma.flat`); 0: always with
            Chroma's HNSW index. Defaults to `FLAT_LIMIT`.
    """

    name = "chroma"

    @property
    def shared_across_processes(self) -> bool:
        """A Chroma server is; a `PersistentClient` is not.

        Chroma says a `PersistentClient` is not process-safe: its HNSW index lives in this
        process's memory.
        """
        return self._host is not None

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        host: str | None = None,
        port: int | None = None,
        collection: str = _COLLECTION,
        flat_limit: int | None = None,
    ) -> None:
        if (path is None) == (host is None):
            raise ValueError("give either path (embedded) or host (server)")
        self._flat_limit = FLAT_LIMIT if flat_limit is None else flat_limit
        # None: not read yet (the first search reads it); False: the store is searched by
        # Chroma (too large, or rows without vectors); else the exact index.
        self._flat: FlatIndex | bool | None = None
        self._flat_lock = threading.Lock()
        self._path = Path(path) if path is not None else None
        self._host = host
        self._port = port
        self._collection_name = collection
        self._client: Any = None
        self._collection: Any = None
        # Only the embedded store has one: a server may have writers this process never sees.
        self._directory: ChunkDirectory | None = None
        self._pass_rates = PassRates()

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
            collection = client.get_or_create_collection(
                self._collection_name,
                embedding_function=None,
                metadata={"hnsw:space": "cosine"},
            )
            _search_wide_enough(collection)
            if self._path is not None:
                self._directory = open_directory(
                    self._path / f"{self._collection_name}.directory.sqlite3",
                    collection,
                    vectors_up_to=self._flat_limit,
                )
            self._collection = collection

        await self._run(open_client)

    async def close(self) -> None:
        """Drop the client (the embedded client persists as it writes)."""
        self._collection = None
        self._client = None
        self._flat = None
        directory, self._directory = self._directory, None
        if directory is not None:
            directory.close()

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
        """Add new chunks; for chunks already stored, only what describes them changes.

        A chunk id names one version's chunk, so its embedding never changes. Re-sending the
        embedding of a stored id makes hnswlib re-link that point, which was seen to leave
        freshly added points unreachable by queries, so a stored id is never added again.

        The embedded store gives Chroma ids and vectors only: the chunk directory is where
        searches read filter fields, and adding them to Chroma as well cost three quarters
        of a write (ADR 52). A Chroma server gets metadata and documents, which its
        searches filter on.
        """
        missing = [c.chunk_id for c in chunks if c.embedding is None]
        if missing:
            raise ConnectorError(self.name, f"chunks without embeddings: {missing[:3]}")

        def write() -> None:
            collection = self._require()
            directory = self._directory
            for start in range(0, len(chunks), _BATCH):
                part = chunks[start : start + _BATCH]
                stored = set(collection.get(ids=[c.chunk_id for c in part], include=[])["ids"])
                fresh = [c for c in part if c.chunk_id not in stored]
                known = [c for c in part if c.chunk_id in stored]
                described: dict[str, Any] = (
                    {}
                    if directory is not None
                    else {
                        "metadatas": [_metadata(c) for c in fresh],
                        "documents": [c.text for c in fresh],
                    }
                )
                if fresh:
                    collection.add(
                        ids=[c.chunk_id for c in fresh],
                        embeddings=[list(cast("Sequence[float]", c.embedding)) for c in fresh],
                        **described,
                    )
                if known and directory is None:
                    collection.update(
                        ids=[c.chunk_id for c in known],
                        metadatas=[_metadata(c) for c in known],
                    )
                if directory is not None:
                    directory.put(part)  # second: see connectors/chroma/directory.py
                    ids = [c.chunk_id for c in part]
                    vectors = [cast("Sequence[float]", c.embedding) for c in part]
                    self._update_flat(lambda flat, i=ids, v=vectors: flat.with_chunks(i, v))

        await self._run(write)

    async def delete_chunks(self, element_ids: Sequence[str]) -> None:
        """Delete every chunk of the elements.

        The embedded store's vectors carry no element ids (ADR 52): the directory names
        their chunks. A vector whose row an interrupted write never made is not found so;
        `chunk_states` reports it, and a repair deletes it by id.
        """
        if not element_ids:
            return

        def delete() -> None:
            collection = self._require()
            if self._directory is None:
                collection.delete(where={"element_id": {"$in": list(element_ids)}})
                return
            doomed = self._directory.chunks_of(element_ids)
            for start in range(0, len(doomed), _BATCH):
                collection.delete(ids=doomed[start : start + _BATCH])
            self._directory.delete_ids(doomed)
            self._update_flat(lambda flat: flat.without(doomed))

        await self._run(delete)

    async def delete_chunk_ids(self, chunk_ids: Sequence[str]) -> None:
        """Delete chunks by id."""

        def delete() -> None:
            collection = self._require()
            for start in range(0, len(chunk_ids), _BATCH):
                collection.delete(ids=list(chunk_ids[start : start + _BATCH]))
            if self._directory is not None:
                self._directory.delete_ids(chunk_ids)
                self._update_flat(lambda flat: flat.without(chunk_ids))

        await self._run(delete)

    async def chunk_states(self) -> dict[str, int]:
        """Every stored chunk id with its `valid_to`, as a search sees it, read page by page.

        With a directory a search filters on the directory's rows, so those are the states;
        a vector the directory has no row for is unusable and reported as `UNUSABLE`, so that
        a check names it stale (or extra) and a repair rewrites (or deletes) it. A directory
        row without a vector is not reported: the chunk is missing.
        """

        def read() -> dict[str, int]:
            collection = self._require()
            if self._directory is not None:
                rows = self._directory.states()
                return {cid: rows.get(cid, UNUSABLE) for cid in all_ids(collection)}
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
            if self._directory is not None:
                return search_directory(
                    self._nearest(collection, self._directory),
                    self._directory,
                    self._pass_rates,
                    embedding,
                    k,
                    search_filter,
                )
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

    @property
    def searches_exactly(self) -> bool | None:
        """Whether searches scan the vectors exactly (ADR 62); None until the first search."""
        return None if self._flat is None else isinstance(self._flat, FlatIndex)

    def _nearest(self, collection: Any, directory: ChunkDirectory) -> Nearest:
        """The exact index while the store is small enough, else Chroma's."""
        flat = self._flat_index(directory)
        return ChromaNearest(collection) if flat is None else FlatNearest(flat)

    def _flat_index(self, directory: ChunkDirectory) -> FlatIndex | None:
        """The exact index, read from the directory by the first search; None: use Chroma."""
        flat = self._flat
        if flat is None:
            with self._flat_lock:  # a write updates it under the same lock, after its commit
                if self._flat is None:
                    loaded = directory.flat_index(self._flat_limit) if self._flat_limit else None
                    self._flat = False if loaded is None else loaded
                flat = self._flat
        return flat if isinstance(flat, FlatIndex) else None

    def _update_flat(self, change: Callable[[FlatIndex], FlatIndex]) -> None:
        """Apply a committed write to the exact index, if one is held (past the limit: drop it)."""
        with self._flat_lock:
            if isinstance(self._flat, FlatIndex):
                changed = change(self._flat)
                self._flat = changed if len(changed) <= self._flat_limit else False

    async def vector_scores(
        self, embedding: Sequence[float], element_ids: Sequence[str], search_filter: SearchFilter
    ) -> list[ChunkHit]:
        """The passing chunks of these elements, scored by cosine similarity, best first.

        With a directory: the directory names the passing chunks, and one query restricted
        to those ids returns their distances. Against a server: the elements' chunks are
        read with their embeddings, filtered by the reference semantics and scored here.
        """
        ids = list(dict.fromkeys(element_ids))
        if not ids or (search_filter.element_types is not None and not search_filter.element_types):
            return []

        def score() -> list[ChunkHit]:
            collection = self._require()
            if self._directory is not None:
                chunk_ids = self._directory.of_elements(ids, search_filter)
                if not chunk_ids:
                    return []
                result = self._nearest(collection, self._directory).within(
                    list(embedding), chunk_ids, len(chunk_ids)
                )
                return hits_of(passing_hits(result, self._directory, search_filter))
            hits: list[ChunkHit] = []
            for start in range(0, len(ids), _BATCH):
                page = collection.get(
                    where={"element_id": {"$in": ids[start : start + _BATCH]}},
                    include=["embeddings", "metadatas", "documents"],
                )
                for cid, vector, meta, doc in zip(
                    page["ids"],
                    page["embeddings"],
                    page["metadatas"],
                    page["documents"],
                    strict=True,
                ):
                    if _allows(search_filter, meta):
                        hits.append(
                            ChunkHit(
                                chunk_id=cid,
                                element_id=str(meta["element_id"]),
                                version=int(meta["version"]),
                                text=doc or "",
                                score=_cosine(embedding, vector),
                            )
                        )
            return sorted(hits, key=lambda h: (-h.score, h.chunk_id))

        return await self._run(score)

    async def count(self) -> int:
        """Number of chunks stored (for `stats` and checks)."""
        return await self._run(lambda: int(self._require().count()))


def _search_wide_enough(collection: Any) -> None:
    """Raise the collection's HNSW `ef_search` to `EF_SEARCH`, for new and older stores.

    Never lowered: a collection someone set wider stays so. A collection without HNSW
    settings (another index kind) is left as it is.
    """
    configuration: Mapping[str, Any] = getattr(collection, "configuration_json", None) or {}
    hnsw: Mapping[str, Any] = configuration.get("hnsw") or {}
    current = hnsw.get("ef_search")
    if isinstance(current, int) and current < EF_SEARCH:
        collection.modify(configuration={"hnsw": {"ef_search": EF_SEARCH}})
