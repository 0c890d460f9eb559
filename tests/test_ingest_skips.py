"""Ingest accounts for every file: a reason code and a detail per skip, on every surface.

Real files in a temporary folder, the real loader, the real model and real stores; no mocks.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import uda
from uda.cli.commands import EXIT_OK, EXIT_USAGE, main
from uda.embedding import Embedder
from uda.errors import UserError
from uda.loaders import SkipReason, load_repository
from uda.loaders.files import MAX_FILE_BYTES, SkipFileError, read_text

LIMIT = 20_000  # bytes: the --max-file-size of these tests; every file but big.md is below
PNG_HEADER = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01"
# The text before the NUL: longer than the 8 KB the loader once probed for binary content.
BEFORE_NUL = "# Late NUL\n\n" + "marmalade " * 1000

EXPECTED = {
    ".hidden": "hidden-folder",
    "big.md": "too-big",
    "empty.md": "empty",
    "image.png": "unsupported-type",
    "late-nul.md": "binary",
    "latin1.md": "not-utf8",
    "link.md": "symlink",
    "picture.md": "binary",
}
EXPECTED_COUNTS = {
    "binary": 2,
    "empty": 1,
    "hidden-folder": 1,
    "not-utf8": 1,
    "symlink": 1,
    "too-big": 1,
    "unsupported-type": 1,
}


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A folder with one good document and one file or folder for most skip reasons."""
    root = tmp_path / "corpus"
    (root / ".hidden").mkdir(parents=True)
    (root / "good.md").write_text("# Lighthouse\n\nThe zephyr lighthouse guards the reef.\n")
    (root / "picture.md").write_bytes(PNG_HEADER)
    # Valid UTF-8 throughout: only the NUL after 10 KB makes it binary.
    (root / "late-nul.md").write_bytes(BEFORE_NUL.encode() + b"\x00quokka sightings\n")
    (root / "empty.md").write_bytes(b"")
    (root / "latin1.md").write_bytes("# Café\n\nCrème brûlée.\n".encode("latin-1"))
    outside = tmp_path / "outside.md"
    outside.write_text("# Outside\n\nA secret beyond the folder.\n")
    (root / "link.md").symlink_to(outside)
    (root / "big.md").write_text("# Big\n\n" + "word " * (LIMIT // 5))
    (root / ".hidden" / "secret.md").write_text("# Secret\n\nHidden notes.\n")
    (root / "image.png").write_bytes(PNG_HEADER)
    return root


def _run(store: Path, *args: str) -> int:
    return main(["--path", str(store), *args])


# -- the Python report ----------------------------------------------------------------------


def test_report_lists_every_skip_with_its_reason_and_nothing_with_a_nul_is_stored(
    corpus: Path, tmp_path: Path, embedder: Embedder
) -> None:
    with uda.connect(path=tmp_path / "store", embedder=embedder) as client:
        report = client.ingest_source(corpus, max_file_bytes=LIMIT)
        ids = client.element_ids()
        found = client.search("marmalade quokka sightings", limit=10, clearance_scope=["internal"])
    assert {entry.path: entry.reason for entry in report.skipped} == EXPECTED
    assert all(isinstance(entry.reason, SkipReason) for entry in report.skipped)
    assert [entry.path for entry in report.skipped] == sorted(EXPECTED)
    assert report.skipped_by_reason() == EXPECTED_COUNTS
    assert list(report.skipped_by_reason()) == sorted(EXPECTED_COUNTS)
    details = {entry.path: entry.detail for entry in report.skipped}
    assert details["late-nul.md"] == f"a NUL byte at offset {len(BEFORE_NUL):,}"
    assert details["picture.md"] == "a NUL byte at offset 8"
    big = (corpus / "big.md").stat().st_size
    assert details["big.md"] == f"{big:,} bytes > {LIMIT:,}"
    assert "outside the folder" in details["link.md"]
    assert details["latin1.md"] == "byte 0xe9 at offset 5 is not UTF-8"
    assert details["empty.md"] == "0 bytes"
    # Only the repository and the good document were loaded and written.
    assert (report.loaded, report.written) == (2, 2)
    assert sorted(ids) == ["corpus:good.md", "repo:corpus"]
    assert not any("late-nul" in r.element_id for r in found.results)


def test_the_default_size_limit_loads_the_big_file(
    corpus: Path, tmp_path: Path, embedder: Embedder
) -> None:
    with uda.connect(path=tmp_path / "store", embedder=embedder) as client:
        report = client.ingest_source(corpus)
    assert "big.md" not in {entry.path for entry in report.skipped}
    assert report.skipped_by_reason()["binary"] == 2  # the NUL needs no size limit to count


def test_a_size_limit_below_one_byte_is_refused(corpus: Path) -> None:
    with pytest.raises(UserError, match="max_file_bytes") as caught:
        load_repository(corpus, max_file_bytes=0)
    assert caught.value.field == "max_file_bytes"


def test_read_text_finds_a_nul_anywhere_and_keeps_the_size_limit(tmp_path: Path) -> None:
    (tmp_path / "tail.txt").write_bytes(b"a" * (MAX_FILE_BYTES - 1) + b"\x00")
    with pytest.raises(SkipFileError) as caught:
        read_text(tmp_path, "tail.txt")
    assert caught.value.reason is SkipReason.BINARY
    (tmp_path / "small.txt").write_text("twelve bytes")
    assert read_text(tmp_path, "small.txt", max_bytes=12) == "twelve bytes"
    with pytest.raises(SkipFileError) as too_big:
        read_text(tmp_path, "small.txt", max_bytes=11)
    assert (too_big.value.reason, too_big.value.detail) == (SkipReason.TOO_BIG, "12 bytes > 11")


def test_a_link_to_a_folder_is_reported_not_followed(tmp_path: Path) -> None:
    root = tmp_path / "linked"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nText.\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "b.md").write_text("# B\n\nText.\n")
    (root / "shortcut").symlink_to(elsewhere, target_is_directory=True)
    src = load_repository(root)
    assert [(entry.path, entry.reason) for entry in src.skipped] == [("shortcut", "symlink")]


# -- the command line -----------------------------------------------------------------------


def test_summary_counts_skips_by_reason(
    corpus: Path, tmp_path: Path, embedder: Embedder, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    assert _run(store, "ingest", str(corpus), "--max-file-size", str(LIMIT)) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    counts = ", ".join(f"{code} {count}" for code, count in EXPECTED_COUNTS.items())
    assert len(lines) == 1
    assert lines[0].startswith("corpus: 2 elements written")
    assert f"; 8 files skipped ({counts}); " in lines[0]


def test_verbose_lists_every_skipped_path_sorted(
    corpus: Path, tmp_path: Path, embedder: Embedder, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    args = ["ingest", str(corpus), "--max-file-size", str(LIMIT), "--verbose"]
    assert _run(store, *args) == EXIT_OK
    summary, *listed = capsys.readouterr().out.splitlines()
    assert "8 files skipped (" in summary
    assert [line.split(" (")[0] for line in listed] == [f"skipped {p}" for p in sorted(EXPECTED)]
    for line, (path, reason) in zip(listed, sorted(EXPECTED.items()), strict=True):
        assert line.startswith(f"skipped {path} ({reason}): ")
    assert f"skipped big.md (too-big): {(corpus / 'big.md').stat().st_size:,} bytes" in listed[1]


def test_json_report_matches_the_python_report(
    corpus: Path, tmp_path: Path, embedder: Embedder, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    args = ["ingest", str(corpus), "--max-file-size", str(LIMIT), "--format", "json"]
    assert _run(store, *args) == EXIT_OK
    report = json.loads(capsys.readouterr().out)  # one JSON object and nothing else
    assert {s["path"]: s["reason"] for s in report["skipped"]} == EXPECTED
    assert all(set(s) == {"path", "reason", "detail"} and s["detail"] for s in report["skipped"])
    assert report["skipped_by_reason"] == EXPECTED_COUNTS
    assert report["repository"] == "corpus"
    assert (report["written"], report["unchanged"], report["deleted"]) == (2, 0, 0)
    assert report["reused"] == report["chunks"] - report["embedded"]
    assert {"edges", "edges_unchanged", "loaded", "id_prefix", "hlc", "seconds"} <= set(report)
    # Run again with the same store: the Python report of the same folder says the same.
    with uda.connect(path=store, embedder=embedder) as client:
        again = client.ingest_source(corpus, max_file_bytes=LIMIT)
    assert [entry.to_dict() for entry in again.skipped] == report["skipped"]


@pytest.mark.parametrize("size", ["0", "-5"])
def test_max_file_size_below_one_is_a_usage_error(
    corpus: Path, tmp_path: Path, size: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(tmp_path / "store", "ingest", str(corpus), f"--max-file-size={size}") == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("uda: error: --max-file-size")
    assert len(err.strip().splitlines()) == 1


def test_help_names_every_reason_and_the_new_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["ingest", "--help"])
    help_text = capsys.readouterr().out
    for option in ("--max-file-size", "--verbose", "--format"):
        assert option in help_text
    missing = [reason.value for reason in SkipReason if f"  {reason.value} " not in help_text]
    assert missing == []
