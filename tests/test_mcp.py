"""`uda mcp`: the agent tools over MCP, read-only, at a clearance fixed on the command line.

One test starts the real server as a subprocess (`python -m uda.agent.mcp_server`, what
`uda mcp` runs) and talks to it over stdio with the mcp package's client; the others use
the same server in process.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

import uda
from ontology import Decision, Document
from uda.agent import TOOLS, build_mcp_server
from uda.agent.mcp_server import add_mcp_parser, clearance_entries, main
from uda.embedding import Embedder
from uda.errors import UnknownClearanceError

ROOT = Path(__file__).resolve().parent.parent
RESTRICTED_TEXT = "The payment signing keys rotate monthly; retried calls are signed again."
ELEMENTS = [
    Document(
        element_id="doc:retries",
        name="Retry policy",
        text="Failed payment calls are retried three times with exponential backoff.",
        sensitivity="public",
    ),
    Decision(
        element_id="adr:7",
        name="Retry payments with idempotency keys",
        text="We retry failed payment calls with an idempotency key per attempt.",
        status="accepted",
        sensitivity="internal",
    ),
    Document(
        element_id="doc:keys", name="Signing keys", text=RESTRICTED_TEXT, sensitivity="restricted"
    ),
]
WRITE_WORDS = ("ingest", "delete", "write", "sync", "repair", "upsert")


def _ids(result: Any) -> list[str]:
    assert not result.is_error, result.content
    return [hit["element_id"] for hit in result.structured_content["hits"]]


def _text(result: Any) -> str:
    return " ".join(block.text for block in result.content)


@pytest.fixture
def store(tmp_path: Path, embedder: Embedder) -> Path:
    path = tmp_path / "store"
    with uda.connect(path=path, embedder=embedder) as client:
        client.ingest(ELEMENTS)
    return path


@pytest.mark.slow
async def test_uda_mcp_over_stdio_is_read_only_and_keeps_its_clearance(store: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k.startswith(("HF_", "TRANSFORMERS_"))}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "uda.agent.mcp_server", "--path", str(store), "--clearance", "internal"],
        env={**env, "ANONYMIZED_TELEMETRY": "False"},
        cwd=ROOT,
    )
    async with Client(params, read_timeout_seconds=120) as session:
        listed = (await session.list_tools()).tools
        assert [t.name for t in listed] == [spec.name for spec in TOOLS]
        for tool in listed:
            assert tool.annotations is not None
            assert tool.annotations.read_only_hint is True
            assert tool.annotations.destructive_hint is False
            assert not any(word in tool.name for word in WRITE_WORDS)
            assert "clearance" not in tool.input_schema.get("properties", {})
            assert tool.input_schema.get("additionalProperties") is False

        found = await session.call_tool("search", {"query": RESTRICTED_TEXT, "limit": 5})
        assert "doc:keys" not in _ids(found)  # restricted, above the server's clearance
        assert "adr:7" in _ids(found)  # internal: granted by --clearance internal
        assert found.structured_content["query_id"] == "q1"

        widened = await session.call_tool(
            "search", {"query": RESTRICTED_TEXT, "clearance_scope": ["*"]}
        )
        assert widened.is_error
        assert "clearance_scope: Extra inputs are not permitted" in _text(widened)

        detail = await session.call_tool("get_result", {"query_id": "q1", "rank": 1})
        assert not detail.is_error
        assert detail.structured_content["query_id"] == "q1"


async def test_the_server_fixes_the_clearance_it_was_built_with(store: Path) -> None:
    async with uda.aconnect(path=store) as client:
        server = build_mcp_server(client, ["public"])
        async with Client(server) as session:
            assert _ids(await session.call_tool("auto_search", {"query": "payment retries"})) == [
                "doc:retries"
            ]
            refined = await session.call_tool(
                "refine_search", {"add_filters": {"element_type": "Decision"}}
            )
            assert _ids(refined) == []
            assert refined.structured_content["refined_from"] == "q1"
            for bad in (
                {"query": "x", "clearance": "restricted"},
                {"query": "x", "sensitivity": "restricted"},
                {"query": "x", "filters": {"clearance_scope": "restricted"}},
            ):
                result = await session.call_tool("semantic_search", bad)
                assert result.is_error, bad


async def test_mistakes_are_error_results_with_guidance(store: Path) -> None:
    async with uda.aconnect(path=store) as client, Client(build_mcp_server(client)) as session:
        missing = await session.call_tool("search", {"limit": 0})
        assert missing.is_error
        assert "query: Field required" in _text(missing)
        assert "limit: Input should be greater than or equal to 1" in _text(missing)
        typo = await session.call_tool("search", {"query": "x", "filters": {"stauts": "ok"}})
        assert "did you mean 'status'?" in _text(typo)
        unknown = await session.call_tool("get_result", {"query_id": "q7", "rank": 1})
        assert "no searches in this conversation yet" in _text(unknown)
        nothing = await session.call_tool("ingest", {"elements": []})
        assert nothing.is_error
        assert "no tool named 'ingest'" in _text(nothing)
        fields = await session.call_tool("list_filter_fields", {"element_type": "Decision"})
        assert "status" in [f["name"] for f in fields.structured_content["fields"]]


def test_clearance_entries_default_to_public_and_are_checked() -> None:
    assert clearance_entries(None) == ["public"]
    assert clearance_entries(["internal,project:core", "project:x"]) == [
        "internal",
        "project:core",
        "project:x",
    ]
    with pytest.raises(UnknownClearanceError, match="secret"):
        clearance_entries(["secret"])


def test_a_bad_clearance_stops_the_server_before_it_serves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--path", str(tmp_path), "--clearance", "secret"]) == 2
    assert "unknown clearance_scope entry 'secret'" in capsys.readouterr().err


def test_the_mcp_command_reads_path_and_profile_before_or_after_it() -> None:
    parser = argparse.ArgumentParser(prog="uda")
    parser.add_argument("--path", type=Path, default=None)
    parser.add_argument("--profile", type=Path, default=None)
    add_mcp_parser(parser.add_subparsers(dest="command"))
    before = parser.parse_args(["--path", "a", "mcp", "--clearance", "internal"])
    after = parser.parse_args(["mcp", "--path", "b", "--profile", "p.toml"])
    assert (before.command, before.path, before.clearance) == ("mcp", Path("a"), ["internal"])
    assert (after.path, after.profile) == (Path("b"), Path("p.toml"))
    assert parser.parse_args(["mcp"]).clearance is None
