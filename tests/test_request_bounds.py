"""One set of request bounds, the same on every surface (uda/query/bounds.py).

Each bad request is refused before any backend is called, with an error naming the JSON
path and the bound: a `UserError` in Python (sync and async), exit 2 from the CLI, a 422
problem over HTTP (and the same `InvalidRequestError` from the remote client), a retry
for an agent and an error result over MCP. The walk is iterative: a request nested far
deeper than Python's recursion limit is refused like one just past the bound.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_fixtures import serve
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client as McpClient

import uda
from ontology import Document, Sensitivity
from uda.agent import build_mcp_server
from uda.cli.commands import EXIT_USAGE, main
from uda.embedding import Embedder
from uda.errors import UserError
from uda.http.remote import AsyncRemoteClient
from uda.query import bounds
from uda.query.aggregates.request import AggregateRequest
from uda.query.contracts import SearchRequest
from uda.query.filters.grammar import parse_filters


def names(error: UserError, field: str) -> bool:
    """Whether the error names `field` (a path ending in "[": any item of that list)."""
    found = str(error.field)
    return found.startswith(field) if field.endswith("[") else found == field


def nested(depth: int, leaf: object = "x") -> object:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


DEEP_PATH = "context_filters.status" + "[0]" * (bounds.MAX_DEPTH - 1)
# (request fields, the field the error names, words of its message)
BAD: list[tuple[dict[str, Any], str, str]] = [
    ({"context_filters": {"status": nested(40)}}, DEEP_PATH, "nest at most 32 deep"),
    ({"context_filters": {"status": nested(5000)}}, DEEP_PATH, "nest at most 32 deep"),
    ({"weights": {"semantic": math.nan}}, "weights.semantic", "finite"),
    ({"weights": {"lexical": math.inf}}, "weights.lexical", "finite"),
    ({"half_life": math.inf}, "half_life", "finite"),
    (
        {"context_filters": {"name": {"$in": ["n"] * (bounds.MAX_ITEMS + 1)}}},
        "context_filters.name.$in",
        "at most 1000 items",
    ),
    (
        {"context_filters": {"name": "x" * (bounds.MAX_STRING + 1)}},
        "context_filters.name",
        "at most 10000 characters",
    ),
    (
        {"context_filters": {"$or": [{"name": ["n"] * 900} for _ in range(12)]}},
        # 11 x (object, list, 900 names) is 9,922 values: the 10,001st is one of the twelfth
        # list's names (which one depends on the other fields a surface sets, e.g. limit).
        "context_filters.$or[11].name[",
        "at most 10000 values",
    ),
]
IDS = [
    "deep",
    "very-deep",
    "nan",
    "inf",
    "inf-half-life",
    "items",
    "string",
    "values",
]


# -- the walk -------------------------------------------------------------------------------
@pytest.mark.parametrize(("fields", "field", "words"), BAD, ids=IDS)
def test_the_model_names_the_path_and_the_bound(
    fields: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(UserError) as caught:
        SearchRequest.build(query="alpha", **fields)
    assert names(caught.value, field)
    assert words in str(caught.value)
    assert str(caught.value).startswith(f"{caught.value.field}: ")
    with pytest.raises(UserError) as aggregate:
        AggregateRequest.build(
            **{k: v for k, v in fields.items() if k == "context_filters"}
            or {"context_filters": {"status": nested(40)}}
        )
    assert "context_filters" in str(aggregate.value.field)


def test_the_bounds_themselves_are_allowed() -> None:
    SearchRequest.build(query="alpha", context_filters={"status": nested(bounds.MAX_DEPTH - 1)})
    SearchRequest.build(query="alpha", context_filters={"name": {"$in": ["n"] * bounds.MAX_ITEMS}})
    SearchRequest.build(query="alpha", context_filters={"name": "x" * bounds.MAX_STRING})
    SearchRequest.build(query="alpha", weights={"semantic": 1e308, "lexical": 0.0})


def test_a_bad_value_shown_in_an_error_is_short_however_deep() -> None:
    with pytest.raises(UserError) as caught:
        SearchRequest.build(query="alpha", limit=nested(3000))  # a field's own error
    assert len(str(caught.value)) < 200


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=60,
)


@settings(max_examples=200, deadline=None)
@given(filters=st.dictionaries(st.text(max_size=8), json_values, max_size=4))
def test_any_filter_value_ends_in_a_request_or_a_user_error(filters: dict[str, Any]) -> None:
    try:
        request = SearchRequest.build(query="alpha", context_filters=filters)
        parse_filters(request.context_filters)
    except UserError:
        return
    assert bounds.violation({"context_filters": request.context_filters}) is None


# -- every surface --------------------------------------------------------------------------
@pytest.fixture
def store(tmp_path: Path, embedder: Embedder) -> Path:
    path = tmp_path / "store"
    with uda.connect(path=path, embedder=embedder) as client:
        client.ingest(
            [
                Document(
                    element_id="d",
                    name="Alpha",
                    text="Alpha notes.",
                    sensitivity=Sensitivity.PUBLIC,
                )
            ]
        )
    return path


@pytest.mark.parametrize(("fields", "field", "words"), BAD, ids=IDS)
async def test_python_sync_and_async(
    store: Path, fields: dict[str, Any], field: str, words: str
) -> None:
    with uda.connect(path=store) as client:
        with pytest.raises(UserError) as sync:
            client.search("alpha", **fields)
        assert names(sync.value, field)
        assert words in str(sync.value)
    async with uda.aconnect(path=store) as aclient:
        with pytest.raises(UserError) as asynchronous:
            await aclient.search("alpha", **fields)
        assert str(asynchronous.value) == str(sync.value)


def test_cli(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deep = json.dumps({"status": nested(40)})
    assert main(["--path", str(store), "search", "alpha", "--where", deep]) == EXIT_USAGE
    assert f"{DEEP_PATH}: lists and objects nest at most 32 deep" in capsys.readouterr().err
    very_deep = '{"status": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert main(["--path", str(store), "search", "alpha", "--where", very_deep]) == EXIT_USAGE
    assert "nest at most 32 deep" in capsys.readouterr().err
    assert (
        main(["--path", str(store), "search", "alpha", "--where", '{"confidence": NaN}'])
        == EXIT_USAGE
    )
    assert "context_filters.confidence: bad operand nan" in capsys.readouterr().err  # the grammar's


async def test_http_and_the_remote_client(tmp_path: Path, embedder: Embedder) -> None:
    async with serve(tmp_path / "uda", embedder) as service:
        headers = {"X-API-Key": service.keys.internal, "Content-Type": "application/json"}
        body = json.dumps({"query": "alpha", "context_filters": {"status": nested(40)}})
        response = await service.http.post("/v1/search", content=body, headers=headers)
        assert response.status_code == 422
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["field"] == DEEP_PATH
        assert "nest at most 32 deep" in response.text
        transport = httpx.ASGITransport(app=service.app)
        remote = AsyncRemoteClient(
            "http://uda.test", api_key=service.keys.internal, transport=transport
        )
        async with remote:  # it builds the same request first: refused before it is sent
            with pytest.raises(UserError) as caught:
                await remote.search("alpha", context_filters={"status": nested(40)})
        assert caught.value.field == DEEP_PATH


async def test_mcp_tools(store: Path) -> None:
    async with uda.aconnect(path=store) as client, McpClient(build_mcp_server(client)) as session:
        result = await session.call_tool(
            "search", {"query": "alpha", "where": {"status": nested(40)}}
        )
        assert result.is_error
        text = " ".join(block.text for block in result.content)  # type: ignore[union-attr]
        assert "nest at most 32 deep" in text
