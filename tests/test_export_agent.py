"""Export through the agent tools and MCP: `export_query` writes only new plain files into a
configured folder (and is refused without one), never for another caller's searches. The
shared ground is in export_fixtures.py.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from export_fixtures import BY_ID, EVERYONE, NEWEST_FIRST, read_back
from pydantic import ValidationError
from test_paging import ELEMENTS, RELATIONS, reference, visible

import uda
from uda.agent.data_models import ExportArgs
from uda.agent.data_tools import ExportRefusedError, export_query
from uda.agent.deps import UDADeps
from uda.agent.models import FindArgs, SearchArgs
from uda.agent.state import UnknownQueryError
from uda.agent.tools import find_elements, search
from uda.cli.commands import main
from uda.embedding import Embedder


# -- agent tools and MCP ------------------------------------------------------------------
@pytest.fixture
async def aclient(tmp_path: Path, embedder: Embedder) -> AsyncIterator[uda.AsyncClient]:
    async with uda.aconnect(path=tmp_path / "uda", embedder=embedder) as client:
        await client.ingest(ELEMENTS, RELATIONS)
        yield client


async def test_export_query_is_refused_without_an_export_folder(
    aclient: uda.AsyncClient, tmp_path: Path
) -> None:
    deps = UDADeps(client=aclient, clearance_scope=EVERYONE)
    found = await find_elements(deps, FindArgs(order_by="-timestamp"))
    before = set(Path.cwd().iterdir())
    with pytest.raises(ExportRefusedError, match="no export folder") as refused:
        await export_query(deps, ExportArgs(query_id=found.query_id))
    assert refused.value.field == "export_dir"
    assert set(Path.cwd().iterdir()) == before
    missing = UDADeps(client=aclient, clearance_scope=EVERYONE, export_dir=tmp_path / "nowhere")
    missing.conversation.add(deps.conversation.get(found.query_id, deps.clearance))
    with pytest.raises(ExportRefusedError, match="does not exist"):
        await export_query(missing, ExportArgs(query_id=found.query_id))
    assert not (tmp_path / "nowhere").exists()


async def test_export_query_writes_only_new_plain_files_in_the_folder(
    aclient: uda.AsyncClient, tmp_path: Path
) -> None:
    folder = tmp_path / "exports"
    folder.mkdir()
    deps = UDADeps(client=aclient, clearance_scope=["internal"], export_dir=folder)
    found = await find_elements(deps, FindArgs(order_by="-timestamp", limit=3))
    answer = await export_query(deps, ExportArgs(query_id=found.query_id, file_name="decisions"))
    assert answer.file == "decisions.csv"
    expected = reference(["internal"], key=lambda e: e.timestamp, descending=True)
    assert (answer.rows, answer.truncated) == (len(expected), False)
    table = read_back("csv", (folder / "decisions.csv").read_bytes())
    assert table.column("element_id").to_pylist() == expected  # every page, not the first 3
    # A ranked search exports with the weights it ranked with, up to max_rows.
    ranked = await search(deps, SearchArgs(query="payment retries", limit=3))
    capped = await export_query(
        deps, ExportArgs(query_id=ranked.query_id, format="parquet", max_rows=5)
    )
    assert (capped.rows, capped.truncated) == (5, True)
    assert capped.file.startswith(ranked.query_id)
    assert capped.file.endswith(".parquet")
    exported = pq.read_table(folder / capped.file).column("element_id").to_pylist()
    deep = await aclient.search(
        "payment retries",
        limit=5,
        clearance_scope=["internal"],
        pool_size=1000,
        weights=ranked.weights,
    )
    assert exported == [r.element_id for r in deep.results]
    assert all(visible(BY_ID[i], ["internal"]) for i in exported)
    # Never overwrites, never follows a link planted under the name.
    with pytest.raises(ExportRefusedError, match="exists"):
        await export_query(deps, ExportArgs(query_id=found.query_id, file_name="decisions"))
    outside = tmp_path / "outside.csv"
    outside.write_text("keep me")
    os.symlink(outside, folder / "linked.csv")
    with pytest.raises(ExportRefusedError, match="exists"):
        await export_query(deps, ExportArgs(query_id=found.query_id, file_name="linked"))
    assert outside.read_text() == "keep me"
    # No folders, no dots, no traversal: the model's schema refuses, and so does the tool.
    for bad in ("../escape", "a/b", ".hidden", "x.csv", "a" * 65):
        with pytest.raises(ValidationError):
            ExportArgs(query_id=found.query_id, file_name=bad)
        with pytest.raises(ExportRefusedError):
            await export_query(
                deps,
                ExportArgs.model_construct(
                    query_id=found.query_id, file_name=bad, format="csv", max_rows=10
                ),
            )
    with pytest.raises(ValidationError):
        ExportArgs(max_rows=10_001)
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["decisions.csv", capped.file, "linked.csv"]
    )
    # Another caller's searches are not theirs to export.
    other = UDADeps(
        client=aclient,
        clearance_scope=["public"],
        export_dir=folder,
        conversation=deps.conversation,
    )
    with pytest.raises(UnknownQueryError):
        await export_query(other, ExportArgs(query_id=found.query_id))


def test_uda_mcp_takes_an_export_folder(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["mcp", "--help"])
    assert done.value.code == 0
    assert "--export-dir" in capsys.readouterr().out


async def test_export_query_through_mcp(aclient: uda.AsyncClient, tmp_path: Path) -> None:
    from mcp import Client

    from uda.agent import TOOLS, build_mcp_server

    assert "export_query" in {spec.name for spec in TOOLS}
    async with Client(build_mcp_server(aclient, EVERYONE)) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert tools["export_query"].annotations.read_only_hint is True  # it cannot write here
        await session.call_tool("find_elements", {"order_by": "-timestamp"})
        refused = await session.call_tool("export_query", {})
        assert refused.is_error
        assert "no export folder" in " ".join(block.text for block in refused.content)
    folder = tmp_path / "mcp-exports"
    folder.mkdir()
    async with Client(build_mcp_server(aclient, EVERYONE, export_dir=folder)) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert tools["export_query"].annotations.read_only_hint is False
        assert tools["export_query"].annotations.destructive_hint is False
        assert tools["search"].annotations.read_only_hint is True
        assert "file_name" in tools["export_query"].input_schema["properties"]
        await session.call_tool("find_elements", {"order_by": "-timestamp"})
        done = await session.call_tool("export_query", {"format": "arrow", "file_name": "all"})
        assert not done.is_error, done.content
        assert done.structured_content["rows"] == len(NEWEST_FIRST)
        escaped = await session.call_tool("export_query", {"file_name": "../../etc/x"})
        assert escaped.is_error
    assert [p.name for p in folder.iterdir()] == ["all.arrow"]
    table = read_back("arrow", (folder / "all.arrow").read_bytes())
    assert table.column("element_id").to_pylist() == NEWEST_FIRST
