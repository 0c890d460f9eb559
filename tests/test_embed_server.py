"""`uda embed-server`: OpenAI's embeddings wire format over the packaged model, its errors
and key, and profiles whose `openai-compatible` embedder points at it."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from embed_fixtures import KEY_VARIABLE, MODEL, EmbedServer, http_embedder, start_server
from http_fixtures import INTERNAL_CORE, QUESTION, corpus

import uda
from uda.cli import main as cli_main
from uda.config import load_profile
from uda.embedding import Embedder
from uda.embedding.http import OpenAICompatibleEmbedder
from uda.errors import ConfigError, ConnectorError

pytest.importorskip("uvicorn")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbedServer]:
    yield from start_server(tmp_path_factory.mktemp("embed-server") / "server.log")


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbedServer]:
    log = tmp_path_factory.mktemp("embed-server-keyed") / "server.log"
    env = {KEY_VARIABLE: "the-right-key-1234"}
    yield from start_server(log, "--api-key-env", KEY_VARIABLE, env=env)


# --- the server -----------------------------------------------------------------------------


def test_the_key_is_required_and_never_repeated(keyed_server: EmbedServer) -> None:
    with pytest.raises(ConnectorError) as missing:
        http_embedder(keyed_server.url).embed_query("x")
    assert "answered 401" in str(missing.value)
    assert "api_key_env" in str(missing.value)
    with pytest.raises(ConnectorError) as wrong:
        http_embedder(keyed_server.url, api_key="a-wrong-key-5678").embed_query("x")
    assert "a-wrong-key-5678" not in str(wrong.value)
    keyed = http_embedder(keyed_server.url, api_key="the-right-key-1234")
    assert keyed.embed_documents(["x", "y"]).shape == (2, 384)
    assert httpx.get(f"{keyed_server.url}/models", timeout=10).status_code == 401


def test_the_server_speaks_the_wire_format(server: EmbedServer, embedder: Embedder) -> None:
    endpoint = f"{server.url}/embeddings"
    one = httpx.post(endpoint, json={"model": MODEL, "input": "payment retries"}, timeout=30)
    body = one.json()
    assert body["object"] == "list"
    assert body["model"] == MODEL
    assert body["data"][0]["object"] == "embedding"
    assert body["data"][0]["index"] == 0
    assert body["usage"]["prompt_tokens"] == body["usage"]["total_tokens"] > 0
    floats = np.array(body["data"][0]["embedding"], dtype=np.float32)
    packed = httpx.post(
        endpoint,
        json={"model": MODEL, "input": ["payment retries"], "encoding_format": "base64"},
        timeout=30,
    ).json()["data"][0]["embedding"]
    np.testing.assert_array_equal(np.frombuffer(base64.b64decode(packed), dtype="<f4"), floats)
    assert float(floats @ embedder.embed_query("payment retries")) >= 0.9999


@pytest.mark.parametrize(
    ("body", "code", "param"),
    [
        (b"not json", 400, None),
        (json.dumps({"model": MODEL, "input": []}).encode(), 400, "input"),
        (json.dumps({"model": MODEL, "input": [[1, 2, 3]]}).encode(), 400, "input"),
        (json.dumps({"model": MODEL, "input": ["x"] * 2049}).encode(), 400, "input"),
        (json.dumps({"input": ["x"]}).encode(), 400, "model"),
        (json.dumps({"model": "gpt-embed", "input": ["x"]}).encode(), 404, "model"),
        (json.dumps({"model": MODEL, "input": "x", "dimensions": 64}).encode(), 400, "dimensions"),
        (
            json.dumps({"model": MODEL, "input": "x", "encoding_format": "int8"}).encode(),
            400,
            "encoding_format",
        ),
    ],
    ids=["not-json", "empty", "tokens", "too-many", "no-model", "other-model", "dims", "format"],
)
def test_the_server_refuses_bad_requests_in_openai_shape(
    server: EmbedServer, body: bytes, code: int, param: str | None
) -> None:
    embedded = server.counter("requests")
    answer = httpx.post(
        f"{server.url}/embeddings",
        content=body,
        headers={"content-type": "application/json"},
        timeout=30,
    )
    assert answer.status_code == code
    error = answer.json()["error"]
    assert error["param"] == param
    assert error["message"]
    assert server.counter("requests") == embedded  # nothing was embedded


def test_embed_server_help_teaches(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli_main(["embed-server", "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    for taught in ('embedder = "openai-compatible"', "--api-key-env", "fingerprint", "curl"):
        assert taught in out


def test_embed_server_refuses_an_unset_key_variable(capsys: pytest.CaptureFixture[str]) -> None:
    missing = "UDA_TEST_VARIABLE_THAT_IS_NOT_SET"
    assert cli_main(["embed-server", "--api-key-env", missing]) == 2
    assert missing in capsys.readouterr().err


# --- the profile ----------------------------------------------------------------------------


def _profile(tmp_path: Path, embedder_table: str, uda_extra: str = "") -> Path:
    tmp_path.mkdir(exist_ok=True)
    file = tmp_path / "uda.toml"
    file.write_text(
        f'[uda]\npath = "data"\nembedder = "openai-compatible"\n{uda_extra}\n'
        f"[embedder]\n{embedder_table}\n"
    )
    return file


def test_a_profile_ingests_and_searches_through_the_server(
    server: EmbedServer, embedder: Embedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UDA_TEST_EMBED_URL", server.url)
    table = f'url = "${{UDA_TEST_EMBED_URL}}"\nmodel = "{MODEL}"\nbatch_tokens = 64\n'
    profile = _profile(tmp_path / "remote", table, "embedding_cache = false")
    elements, relations = corpus()
    before = server.counter("requests")
    with uda.connect(profile) as remote:
        assert isinstance(remote.embedder, OpenAICompatibleEmbedder)
        report = remote.ingest(elements, relations)
        assert report.hlc is not None
        ingest_requests = server.counter("requests") - before
        got = remote.search(QUESTION, limit=5, clearance_scope=INTERNAL_CORE, as_of=report.hlc)
    # Batches of about 64 tokens: the corpus's chunks took more than one request, and the
    # question one more.
    assert ingest_requests > 1
    assert server.counter("requests") - before == ingest_requests + 1
    with uda.connect(path=tmp_path / "local", embedder=embedder) as local:
        stamp = local.ingest(elements, relations).hlc
        want = local.search(QUESTION, limit=5, clearance_scope=INTERNAL_CORE, as_of=stamp)
    assert [r.element_id for r in got.results] == [r.element_id for r in want.results]
    assert got.results


def test_the_profile_reads_the_key_from_the_named_variable(
    keyed_server: EmbedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UDA_TEST_PROFILE_KEY", "the-right-key-1234")
    table = (
        f'url = "{keyed_server.url}"\nmodel = "{MODEL}"\napi_key_env = "UDA_TEST_PROFILE_KEY"\n'
        "dimension = 384\ntimeout_s = 30\nmax_retries = 0\n"
    )
    loaded = load_profile(_profile(tmp_path, table))
    assert "the-right-key-1234" not in repr(loaded)  # the profile holds the name, not the key
    assert dict(loaded.embedder_options)["timeout_s"] == 30.0
    with uda.connect(_profile(tmp_path, table, "embedding_cache = false")) as client:
        assert client.embedder.embed_query("x").shape == (384,)


@pytest.mark.parametrize(
    ("table", "field"),
    [
        ("", "embedder.url"),
        (f'model = "{MODEL}"', "embedder.url"),
        ('url = "http://127.0.0.1:1/v1"', "embedder.model"),
        (f'url = "ftp://example.org/v1"\nmodel = "{MODEL}"', "embedder.url"),
        (f'url = "${{UDA_TEST_UNSET_URL}}"\nmodel = "{MODEL}"', "embedder.url"),
        (f'url = "http://h/v1"\nmodel = "{MODEL}"\ntimeout_s = "slow"', "embedder.timeout_s"),
        (f'url = "http://h/v1"\nmodel = "{MODEL}"\ntimeout_s = 0', "embedder.timeout_s"),
        (f'url = "http://h/v1"\nmodel = "{MODEL}"\nmax_batch = 5000', "embedder.max_batch"),
        (f'url = "http://h/v1"\nmodel = "{MODEL}"\nbatch_tokens = 1.5', "embedder.batch_tokens"),
        (f'url = "http://h/v1"\nmodel = "{MODEL}"\ndimension = true', "embedder.dimension"),
        (f'url = "http://h/v1"\nmodel = "{MODEL}"\nmax_retries = -1', "embedder.max_retries"),
        (f'url = "http://h/v1"\nmodel = "{MODEL}"\napi_key = "sk-1"', "embedder.api_key"),
        (
            f'url = "http://h/v1"\nmodel = "{MODEL}"\napi_key_env = "UDA_TEST_UNSET_KEY"',
            "embedder.api_key_env",
        ),
        (f'url = "http://h/v1"\nmodel = "{MODEL}"\nfingerprint = "../x"', "embedder.fingerprint"),
        ('url = "http://h/v1"\nmodel = 7', "embedder.model"),
    ],
)
def test_a_bad_embedder_table_names_its_key(tmp_path: Path, table: str, field: str) -> None:
    with pytest.raises(ConfigError) as failure:
        load_profile(_profile(tmp_path, table))
    assert failure.value.field == field
    assert field.removeprefix("embedder.") in str(failure.value)


def test_embedder_options_belong_to_the_http_embedder(tmp_path: Path) -> None:
    file = tmp_path / "uda.toml"
    file.write_text('[uda]\nembedder = "onnx"\n\n[embedder]\nurl = "http://h/v1"\n')
    with pytest.raises(ConfigError) as failure:
        load_profile(file)
    assert failure.value.field == "embedder.url"
    assert "takes no options" in str(failure.value)


def test_a_local_model_path_with_the_http_embedder_is_refused(tmp_path: Path) -> None:
    table = f'url = "http://127.0.0.1:1/v1"\nmodel = "{MODEL}"'
    profile = _profile(tmp_path, table, 'model_path = "some/folder"')
    with pytest.raises(ConfigError) as failure:
        uda.connect(profile)
    assert failure.value.field == "model_path"
