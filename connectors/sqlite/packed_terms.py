"""Each chunk's term frequencies packed in one BLOB: the text store's forward index.

Every row of `text_chunks` keeps its terms as one BLOB of `(term id, tf)` pairs, the ids from
`lexicon`. Both lexical paths score from them (ADR 50, ADR 60): the engine's few hundred
candidates, and the exhaustive path's rows that FTS5 finds (`connectors.sqlite.postings`);
numpy picks the query terms out of all of them at once. A write also takes a replaced row's
postings and statistics back from its BLOB, so nothing else has to remember its terms.

The pairs are little-endian uint32, sorted by term id.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

PAIR = np.dtype("<u4")
_PAIR_BYTES = 2 * PAIR.itemsize

_ADD_TERMS = "INSERT OR IGNORE INTO lexicon (term) SELECT value FROM json_each(?)"
_TERM_IDS = "SELECT term, id FROM lexicon WHERE term IN (SELECT value FROM json_each(?))"


def rows_and_blobs_sql(columns: str, source: str) -> str:
    """A statement of one row: `columns` of the chunks `source` names, then their BLOBs.

    `source` is a subquery giving row ids as `doc`; the chunks it names that pass the filter
    (a `{where}` left to fill, over `text_chunks t`) are read in one pass, `columns` being
    aggregates over them (JSON arrays) and the BLOBs concatenated after them in the same
    order. One row, because a search reads beside other threads (`connectors.sqlite.
    json_rows`); BLOBs as they are, because the same bytes as hex text inside the JSON
    cost three times the CPU (1.0 against 2.7 ms for 200 candidates at 30,000 passages).
    """
    return f"""
SELECT {columns}, CAST(group_concat(t.term_freqs, x'') AS BLOB)
FROM ({source}) src
CROSS JOIN text_chunks t ON t.rowid = src.doc
WHERE {{where}}
"""  # noqa: S608 - fixed fragments only


def ensure_column(conn: sqlite3.Connection) -> bool:
    """Add `text_chunks.term_freqs` to a store made before it; whether it was added."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(text_chunks)")}
    if "term_freqs" in columns:
        return False
    conn.execute("ALTER TABLE text_chunks ADD COLUMN term_freqs BLOB")
    return True


def term_ids(conn: sqlite3.Connection, terms: Collection[str]) -> dict[str, int]:
    """Each term's lexicon id, adding the terms the lexicon lacks (inside a write)."""
    if not terms:
        return {}
    listed = json.dumps(sorted(terms))
    conn.execute(_ADD_TERMS, (listed,))
    return dict(conn.execute(_TERM_IDS, (listed,)))


def known_term_ids(conn: sqlite3.Connection, terms: Collection[str]) -> list[int]:
    """The lexicon ids of those of these terms that some chunk ever held (a read)."""
    if not terms:
        return []
    return [tid for _, tid in conn.execute(_TERM_IDS, (json.dumps(sorted(terms)),))]


def pack(counts: Mapping[str, int], ids: Mapping[str, int]) -> bytes:
    """The analyser's counts as sorted `(term id, tf)` pairs, little-endian uint32s."""
    n = len(counts)
    term_ids = np.fromiter(map(ids.__getitem__, counts), dtype=PAIR, count=n)
    order = np.argsort(term_ids)
    pairs = np.empty((n, 2), dtype=PAIR)
    pairs[:, 0] = term_ids[order]
    pairs[:, 1] = np.fromiter(counts.values(), dtype=PAIR, count=n)[order]
    return pairs.tobytes()


def unpack(packed: bytes | None) -> npt.NDArray[np.uint32]:
    """The `(term id, tf)` pairs of one BLOB, as an array of shape (n, 2)."""
    return np.frombuffer(packed or b"", dtype=PAIR).reshape(-1, 2)


def ids_of(packed: bytes | None) -> list[int]:
    """The term ids of one BLOB, in order."""
    return unpack(packed)[:, 0].tolist()


@dataclass(frozen=True)
class _Hits:
    """The pairs of many chunks that hold a wanted term: whose, which term, how often."""

    doc: npt.NDArray[np.int64]  # the chunk's position among those packed
    term: npt.NDArray[np.int64]  # the term's position among the wanted ids
    tf: npt.NDArray[np.float64]


def _hits(packed: bytes, sizes: Sequence[int], wanted: npt.NDArray[np.int64]) -> _Hits:
    counts = np.asarray(sizes, dtype=np.int64) // _PAIR_BYTES
    pairs = np.frombuffer(packed, dtype=PAIR).reshape(-1, 2)
    if len(pairs) != int(counts.sum()):
        raise ValueError(f"packed term frequencies: {len(pairs)} pairs, sizes say {counts.sum()}")
    owner = np.repeat(np.arange(len(sizes)), counts)
    # Each id's position among the wanted (-1: not wanted), looked up by id: one gather,
    # where `np.isin` sorts every pair (ids past the largest wanted share its last slot).
    position = np.full(int(wanted[-1]) + 2, -1, dtype=np.int64)
    position[wanted] = np.arange(len(wanted))
    term = position[np.minimum(pairs[:, 0], len(position) - 1)]
    hit = term >= 0
    return _Hits(doc=owner[hit], term=term[hit], tf=pairs[hit, 1].astype(np.float64))


def _bm25(
    hits: _Hits,
    idf: npt.NDArray[np.float64],
    n_chunks: int,
    lengths: npt.NDArray[np.float64],
    k1: float,
    b: float,
    average_length: float,
) -> npt.NDArray[np.float64]:
    norm = hits.tf + k1 * (1 - b + b * lengths[hits.doc] / average_length)
    contribution = idf[hits.term] * hits.tf * (k1 + 1) / norm
    summed: npt.NDArray[np.float64] = np.bincount(
        hits.doc, weights=contribution, minlength=n_chunks
    ).astype(np.float64, copy=False)
    return summed


def scores(
    packed: bytes,
    sizes: Sequence[int],
    lengths: npt.NDArray[np.float64],
    weights: dict[int, float],
    k1: float,
    b: float,
    average_length: float,
) -> npt.NDArray[np.float64]:
    """BM25 of each packed chunk for terms weighted by idf (`connectors.bm25`'s formula).

    `packed` is the chunks' BLOBs one after the other, `sizes` their sizes in bytes (as one
    statement reads them: `rows_and_blobs_sql`).
    """
    if not sizes or not weights:
        return np.zeros(len(sizes), dtype=np.float64)
    wanted = np.fromiter(sorted(weights), dtype=np.int64)
    idf = np.fromiter((weights[int(t)] for t in wanted), dtype=np.float64)
    hits = _hits(packed, sizes, wanted)
    return _bm25(hits, idf, len(sizes), lengths, k1, b, average_length)


@dataclass(frozen=True)
class Page:
    """Packed chunks read together: their BLOBs one after the other, sizes and lengths."""

    packed: bytes
    sizes: Sequence[int]
    lengths: Sequence[float]


def scores_counting_frequencies(
    pages: Iterable[Page],
    term_ids: Collection[int],
    n_docs: int,
    k1: float,
    b: float,
    average_length: float,
) -> npt.NDArray[np.float64]:
    """BM25 of every packed chunk, each term's document frequency counted among them.

    The exhaustive path's arithmetic: the chunks are every visible chunk that holds a query
    term, so a term's document frequency is the number of them that hold it (and `n_docs`
    the visible count). Lucene's idf, as `connectors.bm25.bm25_top`. The chunks come in
    pages, each one's BLOBs dropped once its query terms are picked out; the scores are in
    the order of the pages' chunks.
    """
    wanted = np.fromiter(sorted(set(term_ids)), dtype=np.int64)
    found: list[_Hits] = []
    lengths: list[npt.NDArray[np.float64]] = []
    n_chunks = 0
    for page in pages:
        if not wanted.size or not page.sizes:
            continue
        hits = _hits(page.packed, page.sizes, wanted)
        found.append(_Hits(doc=hits.doc + n_chunks, term=hits.term, tf=hits.tf))
        lengths.append(np.asarray(page.lengths, dtype=np.float64))
        n_chunks += len(page.sizes)
    if not found:
        return np.zeros(n_chunks, dtype=np.float64)
    every = _Hits(
        doc=np.concatenate([h.doc for h in found]),
        term=np.concatenate([h.term for h in found]),
        tf=np.concatenate([h.tf for h in found]),
    )
    df = np.bincount(every.term, minlength=len(wanted)).tolist()
    # `math.log`, as the engine path and `bm25_top`: the same idf to the last bit.
    idf = np.fromiter((math.log(1 + (n_docs - d + 0.5) / (d + 0.5)) for d in df), dtype=np.float64)
    return _bm25(every, idf, n_chunks, np.concatenate(lengths), k1, b, average_length)
