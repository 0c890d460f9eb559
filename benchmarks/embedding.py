"""Embedders for the runs: one model, each text embedded once per process, and once per machine.

`CachingEmbedder` wraps the packaged MiniLM (`uda.client.shared_embedder`) and remembers
every document vector by its exact text, so the same corpus ingested into the embedded and
the server profile, and the numpy floor over the same passages, pay for the model once.
With a `VectorCache` it also keeps them on disk, keyed by the model's fingerprint and the
text, so a second run of a preset skips the hour of corpus embedding: quality figures do not
depend on when a vector was computed, and the speed figures that do (ingest against raw
embedding throughput) go through the model directly, never through this cache.
Query vectors are cached by the wrapped embedder itself; `uncached_query` measures a query
embedding that no cache answers.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from uda.embedding import Embedder, Vector
from uda.embedding.factory import shared_embedder


def model_fingerprint(folder: Path) -> str:
    """A digest of every file of a model folder: other weights, other vectors, other keys."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


class VectorCache:
    """Document vectors on disk (SQLite), keyed by SHA-256 of the model fingerprint and text.

    Writes are idempotent (a key always maps to the same vector), so an interrupted run
    keeps what it embedded and the next one carries on from there.
    """

    def __init__(self, path: Path, model: str, dimension: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._model = model.encode()
        self._dimension = dimension
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB NOT NULL)"
        )
        self._lock = threading.Lock()

    def _key(self, text: str) -> str:
        return hashlib.sha256(self._model + b"\0" + text.encode()).hexdigest()

    def get_many(self, texts: Iterable[str]) -> dict[str, Vector]:
        """The stored vectors of those `texts` that have one."""
        keyed = {self._key(t): t for t in texts}
        found: dict[str, Vector] = {}
        with self._lock:
            rows = self._db.execute(
                "SELECT key, vector FROM vectors WHERE key IN (SELECT value FROM json_each(?))",
                (json.dumps(list(keyed)),),
            ).fetchall()
        for key, blob in rows:
            vector = np.frombuffer(blob, dtype=np.float32)
            if vector.shape == (self._dimension,):
                found[keyed[key]] = vector
        return found

    def put_many(self, texts: Sequence[str], vectors: Vector) -> None:
        """Store `vectors[i]` as the vector of `texts[i]`."""
        rows = [
            (self._key(t), np.asarray(v, dtype=np.float32).tobytes())
            for t, v in zip(texts, vectors, strict=True)
        ]
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows)
            self._db.execute("COMMIT")

    def close(self) -> None:
        """Release the file."""
        with self._lock:
            self._db.close()


class CachingEmbedder:
    """An `Embedder` that embeds each distinct document text once (and counts what it did).

    `embedded` and `seconds` count the model's work only; `from_disk` counts the vectors
    a `VectorCache` supplied instead.
    """

    def __init__(self, inner: Embedder | None = None, disk: VectorCache | None = None) -> None:
        self._inner = inner or shared_embedder()
        self._disk = disk
        self._documents: dict[str, Vector] = {}
        self._lock = threading.Lock()
        self.embedded = 0
        self.from_disk = 0
        self.seconds = 0.0

    @property
    def inner(self) -> Embedder:
        """The model underneath."""
        return self._inner

    @property
    def dimension(self) -> int:
        """Length of every vector."""
        return self._inner.dimension

    @property
    def fingerprint(self) -> str:
        """The model's: a cache changes no vector."""
        return self._inner.fingerprint

    def embed_documents(self, texts: Sequence[str]) -> Vector:
        """Unit vectors of `texts`, from the cache where seen before."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._documents))
        if missing and self._disk is not None:
            stored = self._disk.get_many(missing)
            with self._lock:
                self._documents.update(stored)
                self.from_disk += len(stored)
            missing = [t for t in missing if t not in stored]
        if missing:
            started = time.perf_counter()
            vectors = self._inner.embed_documents(missing)
            with self._lock:
                self.seconds += time.perf_counter() - started
                self.embedded += len(missing)
                self._documents.update(zip(missing, vectors, strict=True))
            if self._disk is not None:
                self._disk.put_many(missing, vectors)
        with self._lock:
            return np.stack([self._documents[t] for t in texts]).astype(np.float32, copy=False)

    def embed_query(self, text: str) -> Vector:
        """The query's vector (cached by the wrapped embedder)."""
        return self._inner.embed_query(text)

    def uncached_query(self, text: str) -> Vector:
        """Embed a query through the model, never from a cache (to time the real cost)."""
        return self._inner.embed_documents([text])[0]


def warm_queries(embedder: Embedder, queries: Sequence[str]) -> None:
    """Embed every query once, so that timed searches exclude the model."""
    for query in queries:
        embedder.embed_query(query)
