"""The persistent embedding cache: a text is embedded once per model, and a broken cache is
only a slower one."""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

import uda
from uda.config import embedded_profile, load_profile
from uda.embedding import Embedder, Vector
from uda.embedding.cache import CachedEmbedder, EmbeddingCache, text_key
from uda.errors import ConfigError


class CountingEmbedder:
    """The session's real model, counting the texts it is asked to embed (a spy, not a double)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.texts: list[str] = []

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    @property
    def fingerprint(self) -> str:
        return self.inner.fingerprint

    def embed_documents(self, texts: Sequence[str]) -> Vector:
        self.texts.extend(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> Vector:
        return self.inner.embed_query(text)


DOCS = [
    {"element_type": "Document", "element_id": f"d{i}", "name": f"note {i}", "text": text}
    for i, text in enumerate(
        [
            "Payments are retried three times with exponential backoff.",
            "The ledger records a refund as a negative entry.",
            "All services use the shared circuit breaker library.",
        ]
    )
]


def test_vectors_come_back_equal_and_are_embedded_once(tmp_path: Path, embedder: Embedder) -> None:
    spy = CountingEmbedder(embedder)
    cached = CachedEmbedder(spy, tmp_path)
    texts = ["alpha beta", "gamma", "alpha beta", "delta"]
    first = cached.embed_documents(texts)
    assert spy.texts == ["alpha beta", "gamma", "delta"]  # a repeated text once
    assert np.array_equal(first, embedder.embed_documents(texts))
    again = CachedEmbedder(spy, tmp_path)  # another process, the same file
    assert np.array_equal(again.embed_documents(list(reversed(texts))), first[::-1])
    assert spy.texts == ["alpha beta", "gamma", "delta"]  # nothing embedded the second time
    assert (again.embedded, again.reused) == (0, 4)
    assert (tmp_path / f"{embedder.fingerprint}.sqlite3").is_file()


def test_another_model_never_reads_these_vectors(tmp_path: Path, embedder: Embedder) -> None:
    CachedEmbedder(embedder, tmp_path).embed_documents(["alpha"])

    class OtherModel(CountingEmbedder):
        @property
        def fingerprint(self) -> str:
            return "0123456789abcdef"

    other = OtherModel(embedder)
    CachedEmbedder(other, tmp_path).embed_documents(["alpha"])
    assert other.texts == ["alpha"]
    assert len(list(tmp_path.glob("*.sqlite3"))) == 2


def test_a_second_store_of_the_same_corpus_embeds_nothing(
    tmp_path: Path, embedder: Embedder
) -> None:
    spy = CountingEmbedder(embedder)
    cached = CachedEmbedder(spy, tmp_path / "cache")
    with uda.Client(embedded_profile(tmp_path / "one"), embedder=cached) as client:
        client.ingest(DOCS)
    embedded_once = len(spy.texts)
    assert embedded_once >= len(DOCS)
    # A rebuilt store (a new folder) of the same corpus: every vector from the cache.
    with uda.Client(embedded_profile(tmp_path / "two"), embedder=cached) as client:
        report = client.ingest(DOCS)
        hits = client.search("refund entry", clearance_scope=["internal"]).results
    assert len(spy.texts) == embedded_once
    assert report.embedded == embedded_once  # the writer's count: texts it needed vectors for
    assert hits[0].element_id == "d1"


def test_the_profile_turns_the_cache_on_and_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UDA_CACHE_DIR", str(tmp_path / "cache"))
    with uda.Client(embedded_profile(tmp_path / "store")) as client:
        assert isinstance(client.embedder, CachedEmbedder)
        client.ingest(DOCS[:1])
        assert client.embedder.cache.path.parent == tmp_path / "cache" / "embeddings"
        assert client.embedder.cache.count() >= 1
        assert (tmp_path / "cache" / "embeddings").stat().st_mode & 0o077 == 0  # private
    file = tmp_path / "p.toml"
    file.write_text("[uda]\nembedding_cache = false\n")
    with uda.Client(load_profile(file)) as client:
        assert not isinstance(client.embedder, CachedEmbedder)
    file.write_text('[uda]\nembedding_cache = "yes"\n')
    with pytest.raises(ConfigError) as caught:
        load_profile(file)
    assert caught.value.field == "embedding_cache"


def test_an_unwritable_cache_is_bypassed_with_one_warning(
    tmp_path: Path, embedder: Embedder, caplog: pytest.LogCaptureFixture
) -> None:
    if os.geteuid() == 0:
        blocked = tmp_path / "file-not-folder"  # root writes anywhere: a file as the folder
        blocked.write_text("")
    else:
        blocked = tmp_path / "readonly"
        blocked.mkdir(mode=0o500)
    spy = CountingEmbedder(embedder)
    cached = CachedEmbedder(spy, blocked / "embeddings")
    with caplog.at_level(logging.WARNING, logger="uda.embedding.cache"):
        first = cached.embed_documents(["alpha", "beta"])
        second = cached.embed_documents(["alpha"])
    assert np.array_equal(first[0], second[0])
    assert spy.texts == ["alpha", "beta", "alpha"]  # embedded each time, never failed
    warnings = [r for r in caplog.records if "embedding cache" in r.getMessage()]
    assert len(warnings) == 1


def test_a_corrupt_cache_file_is_bypassed(tmp_path: Path, embedder: Embedder) -> None:
    (tmp_path / f"{embedder.fingerprint}.sqlite3").write_bytes(b"not a database" * 100)
    spy = CountingEmbedder(embedder)
    vectors = CachedEmbedder(spy, tmp_path).embed_documents(["alpha"])
    assert vectors.shape == (1, embedder.dimension)
    assert spy.texts == ["alpha"]


def test_the_file_keeps_at_most_its_bound_oldest_first_out(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path / "c.sqlite3", dimension=2, max_vectors=10)
    vector = np.ones(2, dtype=np.float32)
    for i in range(25):
        cache.store([(text_key(f"t{i}"), vector)])
    assert cache.count() <= 10
    newest = cache.lookup([text_key("t24"), text_key("t0")])
    assert list(newest) == [text_key("t24")]
    # Rows of another length (a file written by a model of another dimension) are not served.
    with sqlite3.connect(tmp_path / "c.sqlite3") as conn:
        conn.execute(
            "INSERT INTO vectors (key, vector) VALUES (?, ?)",
            (text_key("wide"), np.ones(3, dtype=np.float32).tobytes()),
        )
    assert cache.lookup([text_key("wide")]) == {}
