"""The ONNX embedder (the default) gives torch's vectors and exports once per model."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from uda.embedding import SentenceTransformerEmbedder, packaged_model_path, weights_fingerprint
from uda.embedding.cache import CachedEmbedder
from uda.embedding.factory import shared_embedder
from uda.embedding.onnx import OnnxEmbedder, export_key, exported_model

pytest.importorskip("onnxruntime")

TEXTS = [
    "payment retries",
    "How does the ledger record a refund that was attempted twice?",
    "Decision: all services use the shared circuit breaker library.",
    "",  # an empty text has a vector too
    "ünïcödé, emoji 🚀 and numbers 12345",
    "word " * 400,  # longer than the model's 256 tokens: cut as sentence-transformers cuts
]


@pytest.fixture(scope="module")
def onnx(tmp_path_factory: pytest.TempPathFactory) -> OnnxEmbedder:
    return OnnxEmbedder(cache=tmp_path_factory.mktemp("onnx-cache"))


@pytest.fixture(scope="module")
def torch_embedder() -> SentenceTransformerEmbedder:
    model = shared_embedder(kind="sentence-transformers")
    assert isinstance(model, SentenceTransformerEmbedder)
    return model


def test_onnx_vectors_match_torch(
    onnx: OnnxEmbedder, torch_embedder: SentenceTransformerEmbedder
) -> None:
    ours = onnx.embed_documents(TEXTS)
    theirs = torch_embedder.embed_documents(TEXTS)
    assert ours.shape == theirs.shape == (len(TEXTS), 384)
    cosines = (ours * theirs).sum(axis=1)
    assert cosines.min() >= 0.9999, cosines
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    query = onnx.embed_query("payment retries")
    assert float(query @ torch_embedder.embed_query("payment retries")) >= 0.9999
    # One model, two runtimes: one fingerprint, so a store embedded by either takes the other.
    assert (
        onnx.fingerprint == torch_embedder.fingerprint == weights_fingerprint(packaged_model_path())
    )


def test_a_batch_gives_the_vectors_of_its_texts_alone(onnx: OnnxEmbedder) -> None:
    together = onnx.embed_documents(TEXTS)
    alone = np.stack([onnx.embed_documents([t])[0] for t in TEXTS])
    assert np.allclose(together, alone, atol=1e-5)  # padding and sorting change nothing


def test_the_export_is_made_once_per_model_and_keyed_by_its_fingerprint(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    first = exported_model(packaged_model_path(), cache)
    stamp = first.stat().st_mtime_ns
    assert exported_model(packaged_model_path(), cache) == first  # not exported again
    assert first.stat().st_mtime_ns == stamp
    assert first.parent.name == export_key(packaged_model_path())
    # Another model (here: the same files with another tokenizer setting) is another key.
    copy = tmp_path / "model"
    shutil.copytree(packaged_model_path(), copy)
    (copy / "sentence_bert_config.json").write_text('{"max_seq_length": 128}')
    assert export_key(copy) != export_key(packaged_model_path())
    assert weights_fingerprint(copy) != weights_fingerprint(packaged_model_path())
    assert not list(first.parent.glob(".model-*"))  # no partial export left


def test_onnx_is_the_default_and_a_profile_may_choose_torch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uda
    from uda.config import load_profile
    from uda.errors import ConfigError

    monkeypatch.setenv("UDA_CACHE_DIR", str(tmp_path / "cache"))  # not the user's cache
    file = tmp_path / "p.toml"
    file.write_text('[uda]\npath = "data"\n')
    profile = load_profile(file)
    assert profile.embedder == "onnx"
    assert load_profile(tmp_path / "folder").embedder == "onnx"
    with uda.Client(profile) as client:
        assert isinstance(client.embedder, CachedEmbedder)
        assert isinstance(client.embedder.inner, OnnxEmbedder)
        client.ingest(
            [{"element_type": "Document", "element_id": "d1", "name": "n", "text": "refunds"}]
        )
        found = client.search("refunds", clearance_scope=["internal"])
        assert [r.element_id for r in found.results] == ["d1"]
    file.write_text('[uda]\nembedder = "sentence-transformers"\nembedding_cache = false\n')
    profile = load_profile(file)
    with uda.Client(profile) as client:
        assert isinstance(client.embedder, SentenceTransformerEmbedder)
    file.write_text('[uda]\nembedder = "torch"\n')
    with pytest.raises(ConfigError, match="embedder") as caught:
        load_profile(file)
    assert caught.value.field == "embedder"


def test_the_int8_variant_is_another_model_close_to_fp32(
    onnx: OnnxEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uda
    from uda.config import load_profile
    from uda.embedding.onnx import quantized_model
    from uda.errors import EmbeddingModelMismatchError

    cache = tmp_path / "cache"
    int8 = OnnxEmbedder(cache=cache, int8=True)
    ours, fp32 = int8.embed_documents(TEXTS), onnx.embed_documents(TEXTS)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    cosines = (ours * fp32).sum(axis=1)
    assert cosines.min() >= 0.97, cosines  # close, not equal: quantised weights
    assert cosines.min() < 0.9999  # and really another model
    # Its own fingerprint: a store keeps one model's vectors.
    assert int8.fingerprint != onnx.fingerprint
    made = quantized_model(packaged_model_path(), cache)
    stamp = made.stat().st_mtime_ns
    assert quantized_model(packaged_model_path(), cache) == made  # quantised once
    assert made.stat().st_mtime_ns == stamp
    assert not list(made.parent.glob(".model-*"))

    monkeypatch.setenv("UDA_CACHE_DIR", str(cache))
    file = tmp_path / "p.toml"
    file.write_text('[uda]\npath = "data"\nembedder = "onnx-int8"\n')
    with uda.Client(load_profile(file)) as client:
        client.ingest(
            [{"element_type": "Document", "element_id": "d1", "name": "n", "text": "refunds"}]
        )
    file.write_text('[uda]\npath = "data"\n')  # the fp32 default on the int8 store
    with pytest.raises(EmbeddingModelMismatchError):
        uda.Client(load_profile(file)).open()
