"""The embedded Chroma store's search: ids and distances from Chroma, the filter from the directory.

Chroma's unfiltered query is its fast path, so a search over-fetches it and keeps the hits
the directory (`connectors.chroma.directory`) says pass the caller's filter. How far to
over-fetch depends on how many pass: all of them for most callers of most stores, few for a
narrow filter. `PassRates` remembers, per filter, the share that passed last time, so that a
filter everything passes asks for its `k` ids and a small margin instead of twice `k`
(ADR 55); a filter seen the first time, or one that passes less, is over-fetched as before
and widened when too few pass. However wide the first query, the answer is the top `k`
passing chunks.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from connectors.chroma.directory import ChunkDirectory
from connectors.contract.records import ChunkHit, SearchFilter

OVERFETCH = 2  # ids asked per wanted hit when the share that passes is unknown or low
# Ids asked beyond the share that passes: the share moves between searches of one filter.
_MARGIN = 1.1
_SLACK = 4
# Beyond this many unfiltered ids a query over the ids that pass is cheaper than widening
# (measured at 100k chunks: 3,200 ids cost 16 ms, a query within 1,000-10,000 ids 10-16 ms).
WIDEST = 2000


class PassRates:
    """The share of a query's ids that passed, for each recent filter.

    Searches run on several threads; a lock keeps the few most recent filters in order.
    """

    def __init__(self, remembered: int = 256) -> None:
        self._rates: OrderedDict[SearchFilter, float] = OrderedDict()
        self._remembered = remembered
        self._lock = threading.Lock()

    def first_fetch(self, search_filter: SearchFilter, k: int) -> int:
        """How many ids to ask Chroma for first, for `k` passing hits."""
        widest = k * OVERFETCH
        if not _hashable(search_filter):
            return widest
        with self._lock:
            rate = self._rates.get(search_filter)
        if rate is None or rate <= 0:
            return widest
        return min(widest, max(k, math.ceil(_MARGIN * k / rate) + _SLACK))

    def observe(self, search_filter: SearchFilter, passed: int, seen: int) -> None:
        """What share of `seen` ids passed the filter."""
        if seen <= 0 or not _hashable(search_filter):
            return
        with self._lock:
            self._rates[search_filter] = passed / seen
            self._rates.move_to_end(search_filter)
            while len(self._rates) > self._remembered:
                self._rates.popitem(last=False)


def _hashable(search_filter: SearchFilter) -> bool:
    """Whether the filter can be remembered (a filter tree holding a list cannot)."""
    try:
        hash(search_filter)
    except TypeError:
        return False
    return True


class Nearest(Protocol):
    """Where the nearest ids come from: Chroma's HNSW index, or the exact in-memory one.

    Both answer as Chroma's query does: `{"ids": [[...]], "distances": [[...]]}`, nearest
    first, the distance being `1 - cosine`.
    """

    def query(self, embedding: list[float], n: int) -> Mapping[str, Any]:
        """The `n` nearest of every chunk."""
        ...

    def within(self, embedding: list[float], ids: list[str], n: int) -> Mapping[str, Any]:
        """The `n` nearest among `ids`."""
        ...


class ChromaNearest:
    """Chroma's query: ids and distances only (ADR 52)."""

    def __init__(self, collection: Any) -> None:
        self._collection = collection

    def query(self, embedding: list[float], n: int) -> Mapping[str, Any]:
        """The `n` nearest by Chroma's HNSW index."""
        return self._collection.query(
            query_embeddings=[embedding], n_results=n, include=["distances"]
        )

    def within(self, embedding: list[float], ids: list[str], n: int) -> Mapping[str, Any]:
        """The `n` nearest among `ids` (Chroma scans them)."""
        return self._collection.query(
            query_embeddings=[embedding], ids=ids, n_results=n, include=["distances"]
        )


def search_directory(
    nearest: Nearest,
    directory: ChunkDirectory,
    rates: PassRates,
    embedding: Sequence[float],
    k: int,
    search_filter: SearchFilter,
) -> list[ChunkHit]:
    """Top `k` passing chunks: ids and distances from `nearest`, the filter from the directory.

    The unfiltered index is over-fetched as the filter's last pass rate says; if too few
    pass, once more as wide as the pass rate so far says is needed; and if that would be
    wider than `WIDEST`, or is still short, the query runs within the ids that pass (exact,
    and the rare case: a filter that passes few).
    """
    query = list(embedding)
    fetch = rates.first_fetch(search_filter, k)
    for attempt in range(2):
        result = nearest.query(query, fetch)
        hits = passing_hits(result, directory, search_filter)
        seen = len(result["ids"][0])
        if not attempt:
            rates.observe(search_filter, len(hits), seen)
        if len(hits) >= k or seen < fetch:
            return hits_of(hits[:k])  # enough, or the whole collection was seen
        rate = len(hits) / seen
        wanted = math.ceil(1.5 * k / rate) if rate else WIDEST + 1
        if attempt or wanted > WIDEST:
            break
        fetch = max(wanted, 2 * fetch)
    allowed = directory.matching(search_filter)
    if not allowed:
        return []
    result = nearest.within(query, allowed, min(k, len(allowed)))
    return hits_of(passing_hits(result, directory, search_filter)[:k])


# A hit that passed the filter: (chunk, element, version, score).
Passing = tuple[str, str, int, float]


def passing_hits(
    result: Mapping[str, Any], directory: ChunkDirectory, search_filter: SearchFilter
) -> list[Passing]:
    """The hits of an ids-and-distances query that pass the filter, nearest first."""
    ids: list[str] = result["ids"][0]
    distances: list[float] = result["distances"][0]
    passing = directory.passing(ids, search_filter)
    return [
        (cid, *passing[cid], 1.0 - float(distance))
        for cid, distance in zip(ids, distances, strict=True)
        if cid in passing
    ]


def hits_of(hits: Sequence[Passing]) -> list[ChunkHit]:
    """The hits kept, without their text.

    The planner reads the text of those it shows from the system of record (ADR 53), so the
    directory keeps none.
    """
    return [
        ChunkHit(chunk_id=cid, element_id=eid, version=version, score=score)
        for cid, eid, version, score in hits
    ]


__all__ = [
    "OVERFETCH",
    "WIDEST",
    "ChromaNearest",
    "Nearest",
    "PassRates",
    "hits_of",
    "passing_hits",
    "search_directory",
]
