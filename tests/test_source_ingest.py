"""`uda.write.ingest`: a whole source written in batches, vanished files tombstoned.

Every test runs on the real embedded profile (Chroma, networkx, SQLite) in a fresh folder;
the only stand-in is a recording wrapper that counts the calls a real client receives.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path

import pytest

import uda
from uda.cli.commands import EXIT_USAGE, main
from uda.client import AsyncClient
from uda.embedding import Embedder
from uda.errors import UserError
from uda.write.ingest import SourceIngestReport, ingest_source
from uda.write.validation import ElementInput, RelationInput
from uda.write.writer import IngestReport


@pytest.fixture
def repo(repo: Path) -> Path:
    """The shared repository (tests/conftest.py) with a binary file the loader skips."""
    (repo / "logo.png").write_bytes(b"\x89PNG\r\n")
    return repo


class Recording:
    """A real client, with every write it was given written down as (call, elements, other).

    `other` counts the relations of an `ingest` and the ids of a `delete`.
    """

    def __init__(self, client: AsyncClient) -> None:
        self.client = client
        self.calls: list[tuple[str, int, int]] = []

    async def ingest(
        self, elements: Iterable[ElementInput] = (), relations: Iterable[RelationInput] = ()
    ) -> IngestReport:
        elements, relations = list(elements), list(relations)
        self.calls.append(("ingest", len(elements), len(relations)))
        return await self.client.ingest(elements, relations)

    async def delete(self, element_ids: Iterable[str]) -> IngestReport:
        ids = list(element_ids)
        self.calls.append(("delete", 0, len(ids)))
        return await self.client.delete(ids)

    async def element_ids(self, prefix: str = "") -> list[str]:
        return await self.client.element_ids(prefix)


async def test_first_ingest_writes_in_batches_and_reports_progress(
    repo: Path, tmp_path: Path, embedder: Embedder
) -> None:
    seen: list[tuple[int, int]] = []
    async with uda.aconnect(path=tmp_path / "uda", embedder=embedder) as client:
        recording = Recording(client)
        report = await ingest_source(
            recording, repo, batch_size=3, progress=lambda done, total: seen.append((done, total))
        )
        ids = await client.element_ids("payments:")
    # Four elements (repository, README, ADR, runbook) in batches of 3 and 1, then the
    # relations in one call; nothing vanished, so nothing to delete.
    relations = recording.calls[2][2]
    assert recording.calls == [("ingest", 3, 0), ("ingest", 1, 0), ("ingest", 0, relations)]
    assert relations > 0
    assert seen == [(0, 4), (3, 4), (4, 4)]
    assert report.repository == "payments"
    assert report.id_prefix == "payments:"
    assert (report.loaded, report.written, report.unchanged, report.deleted) == (4, 4, 0, 0)
    assert report.chunks >= 3  # one or more per document and decision
    assert report.embedded == report.chunks
    assert report.reused == 0
    assert report.edges == relations  # partOf and governedBy, all new
    assert report.edges_unchanged == 0
    assert [(entry.path, entry.reason) for entry in report.skipped] == [
        ("logo.png", "unsupported-type")
    ]
    assert report.skipped_by_reason() == {"unsupported-type": 1}
    assert report.hlc is not None
    assert sorted(ids) == [
        "payments:README.md",
        "payments:docs/adr/0001-idempotency-keys.md",
        "payments:docs/runbook.md",
    ]


async def test_a_second_ingest_writes_nothing_and_a_vanished_file_becomes_a_tombstone(
    repo: Path, tmp_path: Path, embedder: Embedder
) -> None:
    async with uda.aconnect(path=tmp_path / "uda", embedder=embedder) as client:
        first = await ingest_source(client, repo)
        again = await ingest_source(client, repo)
        assert (again.written, again.unchanged, again.deleted) == (0, 4, 0)
        assert (again.chunks, again.embedded, again.edges) == (0, 0, 0)
        assert again.edges_unchanged == first.edges
        assert again.hlc is None  # nothing was stamped

        (repo / "docs" / "runbook.md").unlink()
        recording = Recording(client)
        gone = await ingest_source(recording, repo)
        assert recording.calls[-1] == ("delete", 0, 1)
        assert (gone.loaded, gone.written, gone.deleted) == (3, 0, 1)
        assert gone.edges == 0  # the runbook's closed partOf edge is not a new edge
        assert gone.hlc is not None
        assert first.hlc is not None
        assert gone.hlc > first.hlc
        assert "payments:docs/runbook.md" not in await client.element_ids("payments:")
        response = await client.search(
            "payment provider times out, page on-call", clearance_scope=["internal"]
        )
        assert not any(r.element_id.endswith("runbook.md") for r in response.results)


async def test_keeping_vanished_files_deletes_nothing(
    repo: Path, tmp_path: Path, embedder: Embedder
) -> None:
    async with uda.aconnect(path=tmp_path / "uda", embedder=embedder) as client:
        await ingest_source(client, repo)
        (repo / "docs" / "runbook.md").unlink()
        recording = Recording(client)
        report = await ingest_source(recording, repo, tombstone_vanished=False)
        assert report.deleted == 0
        assert [call[0] for call in recording.calls] == ["ingest", "ingest"]
        assert "payments:docs/runbook.md" in await client.element_ids("payments:")


async def test_tombstones_stay_within_the_source(
    repo: Path, tmp_path: Path, embedder: Embedder
) -> None:
    other = tmp_path / "ledger"
    other.mkdir()
    (other / "notes.md").write_text("# Ledger\n\nThe ledger is append-only.\n")
    async with uda.aconnect(path=tmp_path / "uda", embedder=embedder) as client:
        await ingest_source(client, repo)
        ledger = await ingest_source(client, other)
        payments = await ingest_source(client, repo)
        # Neither source's files are the other's vanished files.
        assert (ledger.deleted, payments.deleted) == (0, 0)
        assert await client.element_ids("ledger:") == ["ledger:notes.md"]
        assert len(await client.element_ids("payments:")) == 3


def test_the_sync_client_reaches_the_same_ingest(
    repo: Path, tmp_path: Path, embedder: Embedder
) -> None:
    seen: list[tuple[int, int]] = []
    with uda.connect(path=tmp_path / "uda", embedder=embedder) as client:
        report = client.ingest_source(
            repo, batch_size=2, progress=lambda done, total: seen.append((done, total))
        )
        again = client.ingest_source(str(repo))
    assert isinstance(report, SourceIngestReport)
    assert seen == [(0, 4), (2, 4), (4, 4)]
    assert (report.written, report.unchanged, again.written, again.unchanged) == (4, 0, 0, 4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.written = 0  # type: ignore[misc]


@pytest.mark.parametrize("batch_size", [0, -1])
async def test_a_batch_size_below_one_is_refused_before_anything_is_written(
    repo: Path, tmp_path: Path, embedder: Embedder, batch_size: int
) -> None:
    async with uda.aconnect(path=tmp_path / "uda", embedder=embedder) as client:
        with pytest.raises(UserError, match="batch_size") as caught:
            await ingest_source(client, repo, batch_size=batch_size)
        assert caught.value.field == "batch_size"
        assert await client.element_ids() == []


async def test_a_missing_folder_is_a_user_error(tmp_path: Path, embedder: Embedder) -> None:
    async with uda.aconnect(path=tmp_path / "uda", embedder=embedder) as client:
        with pytest.raises(UserError, match="not a folder"):
            await client.ingest_source(tmp_path / "nowhere")


@pytest.mark.parametrize("batch", ["0", "-5"])
def test_the_cli_refuses_a_batch_below_one_with_exit_2(
    repo: Path,
    tmp_path: Path,
    embedder: Embedder,
    batch: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Before the module existed, `--batch 0` silently wrote no element and reported success.
    store = tmp_path / "store"
    assert main(["--path", str(store), "ingest", str(repo), "--batch", batch]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"uda: error: --batch {batch}:")
    assert len(err.strip().splitlines()) == 1
    with uda.connect(path=store, embedder=embedder) as client:
        assert client.element_ids() == []
