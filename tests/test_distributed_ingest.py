"""Distributed ingest (issue 19): a Dask cluster's workers embed, the write path is unchanged.

A real local cluster on loopback: a scheduler and two worker processes (each under a nanny
that restarts it), one embedding thread each. The same source ingested through the cluster
and in-process must give the same store; a worker killed mid-ingest loses nothing; running
the ingest again writes and embeds nothing.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import uda
from ontology import Document
from uda.cli.commands import EXIT_OK, main
from uda.config import Profile, embedded_profile
from uda.errors import ConnectorError

pytestmark = pytest.mark.slow
distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A scheduler and two single-threaded worker processes on loopback."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            env={"UDA_EMBED_THREADS": "1"},
        ) as running,
        Client(running) as client,
    ):
        client.wait_for_workers(2, timeout=120)
        yield running


def _profile(root: Path, cluster_address: str | None) -> Profile:
    # No persistent cache: every text must be embedded by this run, here or on the workers.
    return replace(embedded_profile(root), embedding_cache=False, cluster=cluster_address)


def _models_loaded(cluster: Any) -> int:
    """Worker processes that have loaded a model (have embedded something)."""
    from distributed import Client

    def loaded() -> int:
        from uda.embedding import cluster as on_worker

        return len(on_worker._WORKER_EMBEDDERS)  # pyright: ignore[reportPrivateUsage]

    with Client(cluster) as client:
        return sum(client.run(loaded).values())


def _documents(count: int) -> list[Document]:
    return [
        Document(
            element_id=f"doc:d{n}",
            name=f"Note {n}",
            text=f"Field note {n}: the {n % 7}-th valve of pump {n} was replaced and tested. "
            + "The maintenance crew logged pressure readings every hour. " * (1 + n % 3),
        )
        for n in range(count)
    ]


def test_a_cluster_ingest_gives_the_store_a_local_ingest_gives(
    cluster: Any, repo: Path, tmp_path: Path
) -> None:
    with uda.Client(_profile(tmp_path / "spread", cluster.scheduler_address)) as spread:
        report = spread.ingest_source(repo)
        assert report.embedded > 0
        spread_ids = spread.element_ids()
        spread_stats = spread.stats()
        assert spread.check().clean
        query = spread.embedder.embed_query("who is paged when payments time out")
        spread_hits = spread.search("who is paged when payments time out", limit=5)
    assert _models_loaded(cluster) >= 1  # the workers did the embedding
    with uda.Client(_profile(tmp_path / "local", None)) as local:
        local.ingest_source(repo)
        assert local.element_ids() == spread_ids
        local_stats = local.stats()
        for key in ("elements", "states", "chunks", "edges"):
            assert local_stats[key] == spread_stats[key], key
        local_hits = local.search("who is paged when payments time out", limit=5)
        assert np.allclose(local.embedder.embed_query("who is paged when payments time out"), query)
    assert [r.element_id for r in local_hits.results] == [r.element_id for r in spread_hits.results]
    for mine, theirs in zip(local_hits.results, spread_hits.results, strict=True):
        assert mine.score == pytest.approx(theirs.score, abs=1e-4)


def test_a_killed_worker_loses_nothing_and_a_rerun_writes_nothing(
    cluster: Any, tmp_path: Path
) -> None:
    from distributed import Client

    docs = _documents(120)
    with (
        uda.Client(_profile(tmp_path / "store", cluster.scheduler_address)) as client,
        Client(cluster) as dask,
    ):
        first = client.ingest(docs[:40])
        assert first.written == 40
        victim = sorted(dask.scheduler_info()["workers"])[0]
        # While the next batch is being embedded the worker process dies at once, as if
        # killed (its nanny starts a new one); its part is embedded again elsewhere.
        killer = threading.Timer(
            0.3, lambda: dask.run(os._exit, 1, workers=[victim], on_error="ignore")
        )
        killer.start()
        rest = client.ingest(docs[40:])
        killer.join()
        assert rest.written == 80
        assert len(client.element_ids()) == 120
        assert client.check().clean
        stats = client.stats()
        assert stats["states"] == 120  # one version each: nothing written twice
        again = client.ingest(docs)
        assert again.written == 0
        assert again.unchanged == 120
        assert again.embedded == 0
        assert client.stats()["states"] == 120


def test_the_cli_ingests_through_the_cluster(cluster: Any, repo: Path, tmp_path: Path) -> None:
    profile = tmp_path / "uda.toml"
    profile.write_text(f'[uda]\npath = "{tmp_path / "data"}"\nembedding_cache = false\n')
    code = main(
        ["--profile", str(profile), "ingest", str(repo), "--cluster", cluster.scheduler_address]
    )
    assert code == EXIT_OK
    assert main(["--profile", str(profile), "check"]) == EXIT_OK


def test_an_unreachable_scheduler_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from uda.embedding import cluster as cluster_module
    from uda.embedding.cluster import ClusterEmbedder
    from uda.embedding.factory import make_embedder

    monkeypatch.setattr(cluster_module, "CONNECT_TIMEOUT_S", 2.0)
    with pytest.raises(
        ConnectorError, match=r"cannot reach the Dask scheduler at tcp://127\.0\.0\.1:9"
    ):
        ClusterEmbedder(make_embedder(), "tcp://127.0.0.1:9", make=make_embedder)


def test_a_cluster_without_workers_is_a_clear_error_not_a_wait() -> None:
    from distributed import LocalCluster

    from uda.embedding.cluster import ClusterEmbedder
    from uda.embedding.factory import make_embedder

    with LocalCluster(n_workers=0, host="127.0.0.1", dashboard_address=None) as empty:
        embedder = ClusterEmbedder(make_embedder(), empty.scheduler_address, make=make_embedder)
        try:
            with pytest.raises(ConnectorError, match="has no worker"):
                embedder.embed_documents(["a text no worker will embed"])
        finally:
            embedder.close()
