"""Hits without text (ADR 53): the planner reads the text it shows from the system of record.

A vector test double whose hits carry no text stands in for the embedded Chroma store; the
system of record is the real SQLite store, recording which chunk texts the planner asks for.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from test_planner_unit import RecordingVectorDouble, _setup

from connectors.sqlite.connector import SQLiteConnector
from ontology import Document
from uda.query.contracts import SearchRequest
from uda.query.planner import Planner


class TextReadingStore(SQLiteConnector):
    """The real SQLite store, recording which chunk texts the planner reads (ADR 53)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.text_reads: list[list[str]] = []

    async def chunk_texts(self, chunks: Sequence[tuple[str, int, str]]) -> dict[str, str]:
        self.text_reads.append(sorted(cid for _, _, cid in chunks))
        return await super().chunk_texts(chunks)


async def _textless_fixture(tmp_path: Path) -> tuple[Planner, TextReadingStore]:
    sor = TextReadingStore(tmp_path / "sor.sqlite3")
    planner, writer, _ = await _setup(
        tmp_path, [RecordingVectorDouble("vec", with_text=False)], sor
    )
    await writer.ingest(
        [
            Document(
                element_id=f"d{i}",
                name=f"doc {i}",
                text=f"passage {i} about text" + (" see zx0000q" if i == 7 else ""),
                sensitivity="public",
            )
            for i in range(12)
        ],
        [],
    )
    sor.text_reads = []
    return planner, sor


async def test_hits_without_text_get_the_pages_snippets_in_one_read(tmp_path: Path) -> None:
    planner, sor = await _textless_fixture(tmp_path)
    try:
        request = SearchRequest(query="text", limit=3, weights={"lexical": 0.0})
        results = (await planner.search(request)).results
    finally:
        await sor.close()
    assert len(results) == 3
    for result in results:
        number = result.element_id.removeprefix("d")
        assert result.snippet.startswith(f"passage {number} about text")
    # One read, of the page's snippet chunks only (a chunk id is element@version#index).
    assert sor.text_reads == [sorted(f"{r.element_id}@1#0" for r in results)]


async def test_an_exact_term_is_found_in_text_the_legs_did_not_return(tmp_path: Path) -> None:
    """The identifier is only in a chunk's text: read for every candidate before ranking."""
    planner, sor = await _textless_fixture(tmp_path)
    try:
        request = SearchRequest(query="zx0000q", limit=3, weights={"lexical": 0.0})
        response = await planner.search(request)
        results = response.results
        explained = response.explain()
    finally:
        await sor.close()
    assert results[0].element_id == "d7"
    assert explained.results[0].exact is not None
    assert len(sor.text_reads) == 1  # the candidates' texts; the page's are among them
    assert len(sor.text_reads[0]) == 12
