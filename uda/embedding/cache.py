"""A persistent embedding cache: a text is embedded once per model, ever.

Re-indexing a folder, `uda sync`, a store rebuilt from scratch or a second store of the same
corpus ask for the vectors of texts that were embedded before. `CachedEmbedder` keeps every
document vector in a SQLite file per model fingerprint (`<cache root>/embeddings/<fingerprint>
.sqlite3`), keyed by the SHA-256 of the text, and embeds only what the file lacks. The
fingerprint names the model, not the runtime, so vectors cached by one runtime serve another
of the same weights; a different model has a different file and never sees these vectors.

The cache is an optimisation, never a source of truth: a file that cannot be opened, read or
written (a read-only home, a full disk, a corrupt file) is logged once and bypassed, and the
embedder answers as if there were no cache. Queries are not cached here (the embedders keep
the recent ones in memory), so the file holds what was ingested, not what was asked.

Several processes may share a file (SQLite's WAL: readers never wait for the writer). The file
keeps at most `max_vectors` rows; past that the oldest tenth is dropped (first in, first out).
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from uda.embedding.base import Embedder, Vector, empty_vectors

log = logging.getLogger(__name__)

MAX_VECTORS = 1_000_000
"""Rows kept per model by default: about 1.6 GB for a 384-dimension model."""
_LOOKUP_BATCH = 500  # keys per SELECT: under SQLite's bound-parameter limit


def text_key(text: str) -> bytes:
    """The cache key of a text: its SHA-256 (the text itself is never stored)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class EmbeddingCache:
    """Vectors of one model, by text key, in one SQLite file.

    Args:
        path: the file (created with its folder if missing).
        dimension: the model's vector length; rows of another length are ignored.
        max_vectors: rows kept; the oldest tenth goes when a write passes it.
    """

    def __init__(self, path: Path, dimension: int, *, max_vectors: int = MAX_VECTORS) -> None:
        self.path = path
        self._dimension = dimension
        self._max_vectors = max_vectors
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._broken = False

    def _connection(self) -> sqlite3.Connection | None:
        if self._broken:
            return None
        if self._conn is None:
            try:
                # Private to the user: the vectors say something of every text ingested.
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                conn = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS vectors "
                    "(seq INTEGER PRIMARY KEY, key BLOB NOT NULL UNIQUE, vector BLOB NOT NULL)"
                )
                conn.commit()
            except (OSError, sqlite3.Error) as exc:
                self._give_up("open", exc)
                return None
            self._conn = conn
        return self._conn

    def _give_up(self, action: str, exc: Exception) -> None:
        log.warning(
            "embedding cache %s: cannot %s it (%s); embedding without it", self.path, action, exc
        )
        self._broken = True

    def lookup(self, keys: Sequence[bytes]) -> dict[bytes, Vector]:
        """The cached vectors of `keys` (those the file has)."""
        found: dict[bytes, Vector] = {}
        with self._lock:
            conn = self._connection()
            if conn is None:
                return found
            try:
                for start in range(0, len(keys), _LOOKUP_BATCH):
                    batch = keys[start : start + _LOOKUP_BATCH]
                    marks = ",".join("?" * len(batch))
                    rows = conn.execute(
                        f"SELECT key, vector FROM vectors WHERE key IN ({marks})",  # noqa: S608 - marks only
                        batch,
                    )
                    for key, blob in rows:
                        vector = np.frombuffer(blob, dtype=np.float32)
                        if vector.shape[0] == self._dimension:
                            found[key] = vector
            except sqlite3.Error as exc:
                self._give_up("read", exc)
                return {}
        return found

    def store(self, items: Iterable[tuple[bytes, Vector]]) -> None:
        """Keep `items`' vectors (a key already kept stays as it is)."""
        rows = [(key, np.asarray(vector, dtype=np.float32).tobytes()) for key, vector in items]
        if not rows:
            return
        with self._lock:
            conn = self._connection()
            if conn is None:
                return
            try:
                with conn:
                    conn.executemany(
                        "INSERT INTO vectors (key, vector) VALUES (?, ?) ON CONFLICT DO NOTHING",
                        rows,
                    )
                    self._evict(conn)
            except sqlite3.Error as exc:
                self._give_up("write", exc)

    def _evict(self, conn: sqlite3.Connection) -> None:
        last = conn.execute("SELECT max(seq) - min(seq) + 1 FROM vectors").fetchone()[0] or 0
        if last <= self._max_vectors:
            return
        keep_from = conn.execute(
            "SELECT seq FROM vectors ORDER BY seq DESC LIMIT 1 OFFSET ?",
            (self._max_vectors - self._max_vectors // 10,),
        ).fetchone()
        if keep_from is not None:
            conn.execute("DELETE FROM vectors WHERE seq <= ?", keep_from)

    def count(self) -> int:
        """Vectors kept (0 when the file cannot be read)."""
        with self._lock:
            conn = self._connection()
            if conn is None:
                return 0
            try:
                return int(conn.execute("SELECT count(*) FROM vectors").fetchone()[0])
            except sqlite3.Error:
                return 0

    def close(self) -> None:
        """Close the file (it reopens on the next use)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


class CachedEmbedder:
    """An embedder whose document vectors go through an `EmbeddingCache`.

    Args:
        inner: the embedder that computes what the cache lacks.
        folder: the cache root's `embeddings` folder; the file is named by `inner`'s
            fingerprint, opened on first use (the fingerprint may load the model).
        max_vectors: rows kept per model.

    `embedded` counts the texts `inner` was asked to embed, `reused` those the cache answered.
    """

    def __init__(self, inner: Embedder, folder: Path, *, max_vectors: int = MAX_VECTORS) -> None:
        self.inner = inner
        self._folder = folder
        self._max_vectors = max_vectors
        self._cache: EmbeddingCache | None = None
        self._lock = threading.Lock()
        self.embedded = 0
        self.reused = 0

    @property
    def dimension(self) -> int:
        """The inner embedder's."""
        return self.inner.dimension

    @property
    def fingerprint(self) -> str:
        """The inner embedder's: a cache changes no vector."""
        return self.inner.fingerprint

    @property
    def cache(self) -> EmbeddingCache:
        """The file of this model's vectors."""
        with self._lock:
            if self._cache is None:
                path = self._folder / f"{self.inner.fingerprint}.sqlite3"
                self._cache = EmbeddingCache(
                    path, self.inner.dimension, max_vectors=self._max_vectors
                )
            return self._cache

    def embed_documents(self, texts: Sequence[str]) -> Vector:
        """The vectors of `texts`: cached ones read, the rest embedded and kept."""
        if not texts:
            return empty_vectors()
        keys = [text_key(text) for text in texts]
        known = self.cache.lookup(list(dict.fromkeys(keys)))
        missing = list(
            dict.fromkeys(text for text, key in zip(texts, keys, strict=True) if key not in known)
        )
        if missing:
            fresh = self.inner.embed_documents(missing)
            new = {text_key(text): fresh[row] for row, text in enumerate(missing)}
            self.cache.store(new.items())
            known.update(new)
        with self._lock:
            self.embedded += len(missing)
            self.reused += len(texts) - len(missing)
        return np.stack([known[key] for key in keys]).astype(np.float32, copy=False)

    def embed_query(self, text: str) -> Vector:
        """The inner embedder's (queries are cached in memory there, not on disk)."""
        return self.inner.embed_query(text)
