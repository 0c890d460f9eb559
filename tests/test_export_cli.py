"""Export from the command line: `uda export` in every format, its report on stderr, and
its mistakes (exit 2 naming the option, no file). The shared ground is in export_fixtures.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from export_fixtures import EVERYONE, NEWEST_FIRST, STRUCTURED, read_back
from test_paging import ELEMENTS, RELATIONS, reference

import uda
from uda.cli.commands import EXIT_OK, EXIT_USAGE, main
from uda.embedding import Embedder


# -- the command line ---------------------------------------------------------------------
def test_cli_exports_every_format_and_reports_on_stderr(
    tmp_path: Path, embedder: Embedder, capsys: pytest.CaptureFixture[str]
) -> None:
    del embedder  # loaded once for the session; the CLI reuses it
    store = tmp_path / "store"
    with uda.connect(path=store) as client:
        client.ingest(ELEMENTS, RELATIONS)
        expected = client.search(None, limit=100, clearance_scope=EVERYONE, **STRUCTURED)
    base = ["--path", str(store), "export", "--clearance", "restricted,project:*"]
    for fmt, name in (("parquet", "all.parquet"), ("arrow", "all.arrow"), ("csv", "all.csv")):
        out = tmp_path / name
        # The format comes from the suffix; --order-by and --depth as for search.
        assert main([*base, "--order-by=-timestamp", "--depth", "2", "--output", str(out)]) == 0
        err = capsys.readouterr().err
        assert f"{len(NEWEST_FIRST)} rows written to {out} ({fmt})" in err
        table = read_back(fmt, out.read_bytes())
        assert table.column("element_id").to_pylist() == [r.element_id for r in expected.results]
    capped = tmp_path / "capped.csv"
    assert main([*base, "--order-by=-timestamp", "--max-rows", "5", "--output", str(capped)]) == 0
    assert "stopped at --max-rows 5: more rows match" in capsys.readouterr().err
    assert read_back("csv", capped.read_bytes()).num_rows == 5
    where = tmp_path / "where.arrow"
    tree = json.dumps({"partOf.name": "payments"})
    assert main([*base, "--where", tree, "--format", "arrow", "--output", str(where)]) == EXIT_OK
    got = read_back("arrow", where.read_bytes()).column("element_id").to_pylist()
    assert got == reference(
        EVERYONE, keep=lambda e: e.element_id.startswith("doc:") and int(e.element_id[4:]) % 2 == 0
    )
    assert (
        main([*base, "--order-by", "name", "--max-rows", "2", "--output", "-", "--format", "csv"])
        == 0
    )
    captured = capsys.readouterr()
    assert len(captured.out.strip().splitlines()) == 3  # the header and two rows
    assert "2 rows written to standard output (csv)" in captured.err
    ranked = tmp_path / "ranked.parquet"
    assert main([*base, "payment retries", "--max-rows", "4", "--output", str(ranked)]) == 0
    assert read_back("parquet", ranked.read_bytes()).num_rows == 4
    # Mistakes: exit 2 with one line naming the option, and no file.
    for args, word in (
        (["--order-by", "name", "--output", str(tmp_path / "x.txt")], "--format"),
        (["--where", "{not json", "--output", str(tmp_path / "bad.csv")], "--where"),
        (["--order-by", "nope", "--output", str(tmp_path / "bad.csv")], "order_by"),
        (
            ["--order-by", "name", "--max-rows", "0", "--output", str(tmp_path / "bad.csv")],
            "max_rows",
        ),
    ):
        assert main([*base, *args]) == EXIT_USAGE, args
        assert word in capsys.readouterr().err
    assert not (tmp_path / "bad.csv").exists()
    with pytest.raises(SystemExit) as usage:
        main([*base, "--format", "xlsx", "--output", str(tmp_path / "x.xlsx")])
    assert usage.value.code == EXIT_USAGE
    # The other export, the ontology's JSON Schema, is as it was.
    schema = tmp_path / "schema.json"
    assert main(["--path", str(store), "ontology", "export", "--output", str(schema)]) == EXIT_OK
    assert "Decision" in json.loads(schema.read_text())["$defs"]
