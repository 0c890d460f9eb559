"""The shared ground of the export tests (tests/test_export_*.py).

The corpus is test_paging's; the reference is what the caller could read page by page with
cursors. Here: the clearance that sees everything, the formats, the two kinds of request
(structured and ranked), the newest-first answer, reading an export's bytes back as a table,
and `local`, a function-scoped fixture (an embedded store holding the corpus) that a test
module imports and lists in its `__all__`.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
from test_paging import ELEMENTS, RELATIONS, reference

import uda
from uda.embedding import Embedder
from uda.query.export_writers import csv_schema

EVERYONE = ["restricted", "project:*"]
FORMATS = ["arrow", "parquet", "csv"]
BY_ID = {e.element_id: e for e in ELEMENTS}
STRUCTURED: dict[str, Any] = {"order_by": "-timestamp", "expand_depth": 2}
RANKED: dict[str, Any] = {"pool_size": 30, "expand_depth": 2}
NEWEST_FIRST = reference(EVERYONE, key=lambda e: e.timestamp, descending=True)


def read_back(fmt: str, data: bytes) -> pa.Table:
    """An export's bytes as a table (CSV: in its flattened schema)."""
    if fmt == "arrow":
        return pa.ipc.open_stream(data).read_all()
    if fmt == "parquet":
        return pq.read_table(io.BytesIO(data))
    options = pa_csv.ConvertOptions(column_types=csv_schema(), strings_can_be_null=True)
    return pa_csv.read_csv(io.BytesIO(data), convert_options=options)


@pytest.fixture
def local(tmp_path: Path, embedder: Embedder) -> Any:
    """The embedded profile only, for what does not depend on the backends."""
    with uda.connect(path=tmp_path / "local", embedder=embedder) as client:
        client.ingest(ELEMENTS, RELATIONS)
        yield client
