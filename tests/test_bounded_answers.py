"""Bounded answers (issue 23, ADR 40): long text clipped by default, with a marker saying what
and how long; `fields` (or `["*"]`) returns it whole; the same rule on every surface — Python
sync and async, Arrow, the CLI, HTTP (JSON and Arrow), the remote client, the agent tools and
MCP — and exports whole by default.
"""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from http_fixtures import Service, serve

import uda
from ontology import Decision, Document, Element, Relation, Repository, Sensitivity
from uda.agent.deps import UDADeps
from uda.agent.models import GetResultArgs, SearchArgs
from uda.agent.tools import get_result, search
from uda.cli.commands import EXIT_OK, EXIT_USAGE, main
from uda.cli.render import as_json
from uda.embedding import Embedder
from uda.errors import ConfigError, InvalidRequestError
from uda.http.remote import AsyncRemoteClient
from uda.http.wire import ARROW_STREAM, read_stream
from uda.query.projection import DEFAULT_CLIP_CHARS, DEFAULT_CONTEXT_CLIP_CHARS, Projection

PUBLIC = ["public"]
DOCS_ONLY = ["Document"]  # the decision is searchable too; these tests read it as context
DOCS = 12
WORDS = (
    "harbour",
    "crane",
    "ledger",
    "tide",
    "ballast",
    "manifest",
    "berth",
    "gantry",
    "pilot",
    "sounding",
    "draught",
    "hawser",
    "quay",
    "bollard",
    "dredge",
    "fender",
    "mooring",
    "lighter",
    "cargo",
    "freight",
    "winch",
    "tally",
    "surveyor",
    "beacon",
)


def _text(seed: int, chars: int) -> str:
    """Sentences of harbour words, about `chars` long; the first names the document."""
    rng = random.Random(seed)
    sentences = [f"Record {seed} concerns the alpha harbour survey."]
    size = len(sentences[0])
    while size < chars:
        sentence = " ".join(rng.choice(WORDS) for _ in range(12)).capitalize() + "."
        sentences.append(sentence)
        size += len(sentence) + 1
    return " ".join(sentences)


def corpus(doc_chars: int = 15_000) -> tuple[list[Element], list[Relation]]:
    """Long documents in one repository, governed by one long decision."""
    elements: list[Element] = [
        Repository(element_id="repo:harbour", name="harbour", sensitivity=Sensitivity.PUBLIC),
        Decision(
            element_id="adr:survey",
            name="Survey the harbour yearly",
            text=_text(999, doc_chars),
            sensitivity=Sensitivity.PUBLIC,
        ),
    ]
    relations: list[Relation] = []
    for i in range(DOCS):
        elements.append(
            Document(
                element_id=f"doc:{i}",
                name=f"Survey record {i}",
                text=_text(i, doc_chars),
                sensitivity=Sensitivity.PUBLIC,
            )
        )
        relations += [
            Relation(source_id=f"doc:{i}", relation="partOf", target_id="repo:harbour"),
            Relation(source_id=f"doc:{i}", relation="governedBy", target_id="adr:survey"),
        ]
    return elements, relations


TEXTS = {e.element_id: e.text for e in corpus()[0] if isinstance(e, Document | Decision)}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Path:
    path = tmp_path_factory.mktemp("bounded") / "store"
    with uda.connect(path=path, embedder=embedder) as client:
        client.ingest(*corpus())
    return path


@pytest.fixture
async def service(tmp_path: Path, embedder: Embedder) -> AsyncIterator[Service]:
    elements, relations = corpus()
    async with serve(tmp_path / "uda", embedder, elements=elements, relations=relations) as s:
        yield s


def _assert_clipped(result: Any) -> None:
    """A default answer's result: own text clipped to the default, context to its own."""
    whole = TEXTS[result.element_id]
    text = result.properties["text"]
    assert text == whole[:DEFAULT_CLIP_CHARS]
    assert result.truncated["text"] == len(whole)
    for index, node in enumerate(result.context_nodes):
        if node["element_id"] == "adr:survey":
            assert node["properties"]["text"] == TEXTS["adr:survey"][:DEFAULT_CONTEXT_CLIP_CHARS]
            assert result.truncated[f"context_nodes[{index}].text"] == len(TEXTS["adr:survey"])


# -- Python -----------------------------------------------------------------------------------
def test_a_default_answer_clips_long_text_and_says_what_and_how_long(
    store: Path, embedder: Embedder
) -> None:
    with uda.connect(path=store, embedder=embedder) as client:
        response = client.search(
            "alpha harbour survey", limit=5, clearance_scope=PUBLIC, element_types=["Document"]
        )
    assert len(response.results) == 5
    for result in response.results:
        _assert_clipped(result)
        assert any(n["element_id"] == "adr:survey" for n in result.context_nodes)
        # The matching passage, and where it starts in the whole text.
        offset = result.snippet_offset
        assert result.snippet
        assert offset is not None
        assert TEXTS[result.element_id][offset:].startswith(result.snippet[:48])
    # Arrow carries the same marker, in its own column; the text column keeps its type.
    table = response.to_arrow()
    assert table.schema.field("properties").type.field("text").type == pa.string()
    first = table.to_pylist()[0]
    assert dict(first["truncated"]) == response.results[0].truncated
    assert first["snippet_offset"] == response.results[0].snippet_offset
    # Typed elements hold the clipped text and know it, context nodes too.
    element = response.to_elements()[0]
    assert isinstance(element, Document)
    assert element.text == TEXTS[element.element_id][:DEFAULT_CLIP_CHARS]
    assert element.truncated == {"text": len(TEXTS[element.element_id])}
    decision = element.related("governedBy")[0]
    assert isinstance(decision, Decision)
    assert len(decision.text) == DEFAULT_CONTEXT_CLIP_CHARS
    assert decision.truncated == {"text": len(TEXTS["adr:survey"])}


def test_fields_return_the_named_properties_whole_and_star_everything(
    store: Path, embedder: Embedder
) -> None:
    with uda.connect(path=store, embedder=embedder) as client:
        named = client.search(
            "alpha harbour survey", 3, PUBLIC, element_types=DOCS_ONLY, fields=["text"]
        )
        everything = client.search(
            "alpha harbour survey", 3, PUBLIC, element_types=DOCS_ONLY, fields=["*"]
        )
    for result in named.results:
        assert result.properties["text"] == TEXTS[result.element_id]
        assert "text" not in result.truncated
        assert any(path.startswith("context_nodes[") for path in result.truncated)
    for result in everything.results:
        assert result.truncated == {}
        assert result.properties["text"] == TEXTS[result.element_id]
        for node in result.context_nodes:
            if node["element_id"] == "adr:survey":
                assert node["properties"]["text"] == TEXTS["adr:survey"]
    whole = everything.to_elements()[0]
    assert whole.truncated == {}
    assert whole.related("governedBy")[0].truncated == {}


async def test_the_async_client_clips_alike(store: Path, embedder: Embedder) -> None:
    async with uda.aconnect(path=store, embedder=embedder) as client:
        default = await client.search("alpha harbour survey", 3, PUBLIC, element_types=DOCS_ONLY)
        whole = await client.search(
            "alpha harbour survey", 3, PUBLIC, element_types=DOCS_ONLY, fields=["text"]
        )
    for result in default.results:
        _assert_clipped(result)
    assert [r.properties["text"] for r in whole.results] == [
        TEXTS[r.element_id] for r in whole.results
    ]


def test_a_later_page_keeps_the_first_pages_fields(store: Path, embedder: Embedder) -> None:
    with uda.connect(path=store, embedder=embedder) as client:
        first = client.search(None, 2, PUBLIC, order_by="name", fields=["text"])
        assert first.next_cursor is not None
        second = client.search(
            None, 2, PUBLIC, order_by="name", fields=["text"], cursor=first.next_cursor
        )
    assert second.results
    assert all("text" not in r.truncated for r in [*first.results, *second.results])


def test_an_unknown_field_is_named(store: Path, embedder: Embedder) -> None:
    with (
        uda.connect(path=store, embedder=embedder) as client,
        pytest.raises(InvalidRequestError) as caught,
    ):
        client.search("alpha", 3, PUBLIC, fields=["txet"])
    assert caught.value.field == "fields"
    assert "txet" in str(caught.value)


def test_the_profile_sets_the_clip(tmp_path: Path, embedder: Embedder) -> None:
    profile = tmp_path / "uda.toml"
    profile.write_text(
        '[uda]\npath = "store"\n\n[search]\nclip_chars = 300\ncontext_clip_chars = 50\n'
    )
    with uda.connect(str(profile), embedder=embedder) as client:
        client.ingest(*corpus(2_000))
        result = client.search("alpha harbour survey", 1, PUBLIC, element_types=DOCS_ONLY).results[
            0
        ]
    assert len(result.properties["text"]) == 300
    decision = next(n for n in result.context_nodes if n["element_id"] == "adr:survey")
    assert len(decision["properties"]["text"]) == 50
    profile.write_text('[uda]\npath = "store"\n\n[search]\nclip_chars = 0\n')
    with pytest.raises(ConfigError) as caught:
        uda.connect(str(profile), embedder=embedder)
    assert caught.value.field == "search.clip_chars"


# -- size: the point of it --------------------------------------------------------------------
def _sizes(response: Any) -> tuple[int, int]:
    """The answer's bytes as the CLI prints JSON, and as an Arrow IPC stream."""
    text = as_json([response], explain=False)
    sink = pa.BufferOutputStream()
    table = response.to_arrow()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return len(text.encode()), sink.getvalue().size


# A documentation estate's context: one hop along the edges (its repository, its decision).
CONTEXT_MODE: dict[str, Any] = {"traverse": "context", "expand_depth": 1}


def test_an_answer_does_not_grow_with_the_documents(tmp_path: Path, embedder: Embedder) -> None:
    """The same corpus with documents ten times longer: the default answer keeps its size
    (in either graph mode), ten results of a documentation estate stay under 64 KB, and the
    whole answer is what grows."""
    answers: dict[int, dict[str, tuple[int, int]]] = {}
    for chars in (3_000, 30_000):
        with uda.connect(path=tmp_path / str(chars), embedder=embedder) as client:
            client.ingest(*corpus(chars))
            ask = ("alpha harbour survey", 10, PUBLIC)
            answers[chars] = {
                "auto": _sizes(client.search(*ask)),
                "context": _sizes(client.search(*ask, **CONTEXT_MODE)),
                "whole": _sizes(client.search(*ask, **CONTEXT_MODE, fields=["*"])),
            }
    small, large = answers[3_000], answers[30_000]
    for mode in ("auto", "context"):
        for short, long in zip(small[mode], large[mode], strict=True):
            assert long <= short * 1.02, (mode, short, long)  # only longer lengths' digits
    assert max(large["context"]) < 64 * 1024
    assert min(large["whole"]) > 5 * max(small["whole"])


# -- HTTP and the remote client ---------------------------------------------------------------
async def test_http_clips_in_json_and_arrow_and_takes_fields(service: Service) -> None:
    headers = {"X-API-Key": service.keys.admin}
    body = {
        "query": "alpha harbour survey",
        "limit": 10,
        "clearance_scope": PUBLIC,
        **CONTEXT_MODE,
    }
    answer = await service.http.post("/v1/search", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert len(answer.content) < 64 * 1024
    for result in results:
        assert len(result["properties"]["text"]) == DEFAULT_CLIP_CHARS
        assert result["truncated"]["text"] == len(TEXTS[result["element_id"]])
    arrow = await service.http.post(
        "/v1/search", json=body, headers={**headers, "Accept": ARROW_STREAM}
    )
    table, _ = read_stream(arrow.content)
    marks: list[Any] = table.column("truncated").to_pylist()
    assert [dict(t) for t in marks] == [r["truncated"] for r in results]
    whole = await service.http.post(
        "/v1/search", json={**body, "fields": ["text"]}, headers=headers
    )
    assert [r["properties"]["text"] for r in whole.json()["results"]] == [
        TEXTS[r["element_id"]] for r in whole.json()["results"]
    ]
    bad = await service.http.post("/v1/search", json={**body, "fields": ["txet"]}, headers=headers)
    assert bad.status_code == 422
    assert bad.headers["content-type"].startswith("application/problem+json")
    assert "fields" in bad.text
    # The element lookup stays whole.
    element = await service.http.get("/v1/elements/doc:0", headers=headers)
    assert element.json()["properties"]["text"] == TEXTS["doc:0"]


async def test_the_remote_client_gets_what_the_service_clipped(service: Service) -> None:
    transport = httpx.ASGITransport(app=service.app)
    async with AsyncRemoteClient(
        "http://uda.test", api_key=service.keys.admin, transport=transport
    ) as remote:
        default = await remote.search("alpha harbour survey", 3, PUBLIC, element_types=DOCS_ONLY)
        whole = await remote.search(
            "alpha harbour survey", 3, PUBLIC, element_types=DOCS_ONLY, fields=["*"]
        )
        with pytest.raises(InvalidRequestError) as caught:
            await remote.search("alpha", 3, PUBLIC, fields=["txet"])
    local = await service.client.search("alpha harbour survey", 3, PUBLIC, element_types=DOCS_ONLY)
    assert [r.truncated for r in default.results] == [r.truncated for r in local.results]
    for result in default.results:
        _assert_clipped(result)
    assert default.to_elements()[0].truncated == {"text": len(TEXTS[default.results[0].element_id])}
    assert all(r.truncated == {} for r in whole.results)
    assert caught.value.field == "fields"


# -- CLI ----------------------------------------------------------------------------------------
def test_cli_clips_by_default_and_takes_fields(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--path", str(store), "search", "alpha harbour survey", "--clearance", "public"]
    assert main([*args, "--format", "json", "--limit", "2"]) == EXIT_OK
    default = json.loads(capsys.readouterr().out)["results"]
    assert all(len(r["properties"]["text"]) == DEFAULT_CLIP_CHARS for r in default)
    assert all(r["truncated"]["text"] == len(TEXTS[r["element_id"]]) for r in default)
    assert main([*args, "--format", "json", "--limit", "2", "--fields", "text"]) == EXIT_OK
    whole = json.loads(capsys.readouterr().out)["results"]
    assert [r["properties"]["text"] for r in whole] == [TEXTS[r["element_id"]] for r in whole]
    assert main([*args, "--fields", "txet"]) == EXIT_USAGE
    assert "fields" in capsys.readouterr().err


def test_an_export_is_whole_by_default(store: Path, embedder: Embedder, tmp_path: Path) -> None:
    out = tmp_path / "all.parquet"
    with uda.connect(path=store, embedder=embedder) as client:
        client.export(None, PUBLIC, {"element_type": "Document"}, format="parquet", sink=out)
    rows = pq.read_table(out).to_pylist()
    assert len(rows) == DOCS
    assert all(r["properties"]["text"] == TEXTS[r["element_id"]] for r in rows)
    assert all(not r["truncated"] for r in rows)


# -- agent tools and MCP ------------------------------------------------------------------------
async def test_get_result_shows_clipped_text_and_reads_fields_whole(
    store: Path, embedder: Embedder
) -> None:
    async with uda.aconnect(path=store, embedder=embedder) as client:
        deps = UDADeps(client=client, clearance_scope=PUBLIC)
        answer = await search(deps, SearchArgs(query="alpha harbour survey", limit=3))
        first = await get_result(deps, GetResultArgs(query_id=answer.query_id, rank=1))
        element_id = first.element_id
        assert len(first.properties["text"]) == DEFAULT_CLIP_CHARS
        assert first.truncated == {"text": len(TEXTS[element_id])}
        whole = await get_result(
            deps, GetResultArgs(query_id=answer.query_id, rank=1, fields=["text"])
        )
        assert whole.properties["text"] == TEXTS[element_id]
        assert whole.truncated == {}
        assert whole.score == first.score


async def test_mcp_get_result_takes_fields(store: Path, embedder: Embedder) -> None:
    from mcp import Client

    from uda.agent import build_mcp_server

    async with uda.aconnect(path=store, embedder=embedder) as client:
        server = build_mcp_server(client, clearance_scope=PUBLIC)
        async with Client(server) as session:
            found = await session.call_tool("search", {"query": "alpha harbour survey"})
            assert not found.is_error, found.content
            query_id = found.structured_content["query_id"]
            detail = await session.call_tool(
                "get_result", {"query_id": query_id, "rank": 1, "fields": ["text"]}
            )
            assert not detail.is_error, detail.content
            content = detail.structured_content
            assert content["properties"]["text"] == TEXTS[content["element_id"]]
            bad = await session.call_tool(
                "get_result", {"query_id": query_id, "rank": 1, "fields": ["txet"]}
            )
            assert bad.is_error
            assert "fields" in " ".join(block.text for block in bad.content)


def test_projection_clips_extras_unless_named() -> None:
    """Pure: `extras` names every extra; a named extra (a user subclass's field) is whole."""
    properties, extras = {"text": "abcdef", "status": "ok"}, {"notes": "xyzxyz", "body": "123456"}
    got = Projection.of(None, clip_chars=3).own(properties, extras, "snippet")
    assert got == (
        {"text": "abc", "status": "ok"},
        {"notes": "xyz", "body": "123"},
        "sni",
        {"text": 6, "extras.notes": 6, "extras.body": 6, "snippet": 7},
    )
    assert Projection.of(["extras"], clip_chars=3).own(properties, extras, None)[1] == extras
    named = Projection.of(["body"], clip_chars=3).own(properties, extras, None)
    assert named[1] == {"notes": "xyz", "body": "123456"}
    assert Projection.of(["*"], clip_chars=3).own(properties, extras, "s")[3] == {}
