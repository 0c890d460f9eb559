"""A real peer: txtai (embeddings, BM25, SQL and a graph in one library), default settings.

Quality runs load the same MiniLM weights by path (`uda.embedding.packaged_model_path()`,
never a hub name) and otherwise keep txtai's defaults: its own transformers pooling, Faiss
(exact `IDMap,Flat` up to 5,000 rows, `IVF` with its default nprobe above), BM25 with
normalised scores, convex hybrid fusion at 0.5. Dense-only and BM25-only rankings come from
the same hybrid index with weights 1.0 and 0.0. Passages are indexed as
`"{title}. {text}"`, txtai's own BEIR convention.

Latency runs on the synthetic corpus give txtai the generator's vectors through its
`external` vectors method (a plain function), filter clearance in its SQL, and expand hits
over a txtai graph (networkx backend) holding the same edges, one `edges()` call per node.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from uda.query.clearance import Clearance

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


# txtai's own model cache, shared by every index of the run: the weights load once.
_MODELS: dict[str, Any] = {}


def _embeddings(config: dict[str, Any]) -> Any:
    from txtai import Embeddings

    return Embeddings(config, models=_MODELS)


class TxtaiPeer:
    """One txtai index (content stored, so SQL works); dense, sparse or hybrid."""

    def __init__(
        self,
        *,
        model_path: str | None = None,
        transform: Callable[[Sequence[str]], np.ndarray] | None = None,
        hybrid: bool = True,
        faiss: Mapping[str, Any] | None = None,
    ) -> None:
        config: dict[str, Any] = {"content": True}
        if transform is not None:
            config.update(method="external", transform=transform)
        else:
            from uda.embedding import packaged_model_path

            config["path"] = model_path or packaged_model_path()
        if hybrid:
            config["hybrid"] = True
        if faiss:
            config["faiss"] = dict(faiss)
        self.config = config
        self.embeddings = _embeddings(config)
        self.graph: Any = None

    def index(self, rows: Iterable[tuple[str, str | dict[str, Any]]]) -> None:
        """Index `(id, text or {"text": ..., other columns})` rows."""
        self.embeddings.index((uid, data, None) for uid, data in rows)

    @property
    def ann_components(self) -> str | None:
        """The Faiss index txtai chose (e.g. `IDMap,Flat` or `IVF132,Flat`)."""
        build = self.embeddings.config.get("build", {})
        settings = build.get("settings", {}) if isinstance(build, dict) else {}
        return settings.get("components")

    def stored_vectors(self) -> np.ndarray:
        """The passage vectors txtai indexed, in indexing order, read back from its Faiss index.

        Lets other builds over the same vectors skip re-encoding the corpus (minutes on CPU).
        """
        import faiss

        index = self.embeddings.ann.backend
        if "IVF" in (self.ann_components or ""):
            ivf = faiss.extract_index_ivf(index)
            ivf.make_direct_map()
            return np.asarray(ivf.reconstruct_n(0, index.ntotal))
        return np.asarray(faiss.downcast_index(index).index.reconstruct_n(0, index.ntotal))

    def query_vectors(self, texts: Sequence[str]) -> np.ndarray:
        """txtai's own vectors of these texts."""
        return np.asarray(self.embeddings.batchtransform(list(texts)))

    def search(self, query: str, limit: int, weights: float | None = None) -> list[str]:
        """Ids of the top `limit` rows; weights: 1.0 dense only, 0.0 BM25 only, None default."""
        results = self.embeddings.search(query, limit, weights=weights)
        return [str(r["id"]) for r in results]

    def search_cleared(
        self, query: str, limit: int, clearance: Clearance, weights: float | None = None
    ) -> list[dict[str, Any]]:
        """Top rows that a caller may see, with clearance filtered in txtai's SQL.

        Rows need `rank` (sensitivity rank) and `scope` ('' for none) columns.
        """
        where = f"rank <= {int(clearance.level.rank)}"
        if not clearance.all_projects:
            allowed = ["''", *(f"'{p}'" for p in sorted(clearance.projects) if "'" not in p)]
            where += f" and scope in ({', '.join(allowed)})"
        sql = f"select id, eid, score from txtai where similar(:q) and {where}"  # noqa: S608 - values are ours, not user input
        return self.embeddings.search(sql, limit, weights=weights, parameters={"q": query})

    # -- graph ----------------------------------------------------------------------------
    def build_graph(self, edges: Iterable[tuple[str, str]]) -> None:
        """A txtai graph (networkx backend) with these undirected edges between element ids."""
        from txtai.graph import GraphFactory

        graph = GraphFactory.create({"backend": "networkx"})
        graph.initialize()
        graph.addedges([(a, b, {"weight": 1.0}) for a, b in edges])
        self.graph = graph

    def expand(self, element_id: str, depth: int) -> set[str]:
        """Nodes within `depth` hops of one element, one `edges()` call per visited node."""
        if self.graph is None:
            return set()
        seen = {element_id}
        frontier = [element_id]
        for _ in range(depth):
            following: list[str] = []
            for node in frontier:
                for neighbour in self.graph.edges(node) or {}:
                    if neighbour not in seen:
                        seen.add(neighbour)
                        following.append(neighbour)
            frontier = following
        return seen - {element_id}

    def close(self) -> None:
        """Release the index."""
        self.embeddings.close()
