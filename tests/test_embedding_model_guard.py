"""A store records the model that made its vectors and refuses another model's."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import uda
from uda.cli import main
from uda.config import embedded_profile, load_profile
from uda.embedding import Embedder, packaged_model_path, weights_fingerprint
from uda.errors import ConfigError, EmbeddingModelMismatchError

DOC = {"element_type": "Document", "element_id": "d1", "name": "refunds", "text": "refund policy"}


@pytest.fixture(scope="module")
def other_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another model: the packaged one cut at 128 tokens (long texts get other vectors)."""
    folder = tmp_path_factory.mktemp("other-model") / "model"
    shutil.copytree(packaged_model_path(), folder)
    (folder / "sentence_bert_config.json").write_text('{"max_seq_length": 128}')
    return folder


def _profile(root: Path, model: Path | None, tmp_path: Path) -> Path:
    file = tmp_path / f"{root.name}-{'other' if model else 'packaged'}.toml"
    lines = ["[uda]", f'path = "{root}"', 'embedder = "sentence-transformers"']
    if model is not None:
        lines.append(f'model_path = "{model}"')
    file.write_text("\n".join(lines) + "\n")
    return file


def test_the_first_write_records_the_model_and_another_model_is_refused(
    tmp_path: Path, embedder: Embedder, other_model: Path
) -> None:
    root = tmp_path / "store"
    with uda.Client(embedded_profile(root), embedder=embedder) as client:
        client.ingest([DOC])
    other = load_profile(_profile(root, other_model, tmp_path))
    with pytest.raises(EmbeddingModelMismatchError) as caught:
        uda.Client(other).open()
    error = caught.value
    assert isinstance(error, ConfigError)
    assert error.field == "embedder"
    mine, theirs = weights_fingerprint(packaged_model_path()), weights_fingerprint(other_model)
    assert (error.recorded, error.current) == (mine, theirs)
    assert mine in str(error)
    assert theirs in str(error)
    assert "re-embed" in str(error)
    # The same model through the other runtime is the same model: accepted.
    same = load_profile(_profile(root, None, tmp_path))
    with uda.Client(same) as client:
        assert client.search("refund", clearance_scope=["internal"]).results[0].element_id == "d1"


def test_stats_name_the_embedder_and_the_stores_model(tmp_path: Path, embedder: Embedder) -> None:
    with uda.Client(embedded_profile(tmp_path / "store"), embedder=embedder) as client:
        before = client.stats()
        client.ingest([DOC])
        after = client.stats()
    assert before["embedder"] == after["embedder"] == "onnx"
    assert before["embedding_model"] is None
    assert after["embedding_model"] == embedder.fingerprint


def test_a_store_without_vectors_takes_any_model_until_its_first_write(
    tmp_path: Path, embedder: Embedder, other_model: Path
) -> None:
    root = tmp_path / "store"
    with uda.Client(embedded_profile(root), embedder=embedder) as client:
        client.search("nothing yet", clearance_scope=["internal"])  # a read records nothing
    other = load_profile(_profile(root, other_model, tmp_path))
    with uda.Client(other) as client:
        client.ingest([DOC])  # the other model's store from now on
    with pytest.raises(EmbeddingModelMismatchError):
        uda.Client(embedded_profile(root), embedder=embedder).open()


def test_the_cli_names_both_models_without_a_traceback(
    tmp_path: Path,
    embedder: Embedder,
    other_model: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = tmp_path / "store"
    with uda.Client(embedded_profile(root), embedder=embedder) as client:
        client.ingest([DOC])
    code = main(["--profile", str(_profile(root, other_model, tmp_path)), "search", "refund"])
    err = capsys.readouterr().err
    assert code == 2
    assert weights_fingerprint(other_model) in err
    assert "Traceback" not in err


@pytest.fixture(scope="module")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    pytest.importorskip("psycopg")
    from postgres_fixtures import running_postgres

    with running_postgres(tmp_path_factory.mktemp("pg")) as (_, url):
        yield url


def test_postgres_records_one_model_and_the_first_claim_wins(postgres: str) -> None:
    from postgres_fixtures import fresh_schema

    from connectors.postgres.connector import PostgresConnector

    schema = fresh_schema()

    async def scenario() -> tuple[str | None, list[str], str | None]:
        store = PostgresConnector(postgres, dimension=384, exact=True, schema=schema)
        await store.connect()
        try:
            before = await store.embedding_model()
            claims = await asyncio.gather(*(store.claim_embedding_model(f"m{i}") for i in range(8)))
        finally:
            await store.close()
        reopened = PostgresConnector(postgres, dimension=384, exact=True, schema=schema)
        await reopened.connect()
        try:
            return before, claims, await reopened.embedding_model()
        finally:
            await reopened.close()

    before, claims, after = asyncio.run(scenario())
    assert before is None
    assert len(set(claims)) == 1  # concurrent first writers agree on one winner
    assert after == claims[0]
