"""`uda ingest`: load a folder or git repository and write what changed.

One summary line counts every file left out by its reason (`uda.loaders.files.SkipReason`);
`--verbose` lists them, `--format json` prints the whole report.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from uda.cli.exits import EXIT_OK, CliError
from uda.loaders.files import MAX_FILE_BYTES

if TYPE_CHECKING:
    from uda.write.ingest import SourceIngestReport

INGEST_EPILOG = f"""\
examples:
  uda ingest .                          index this folder or repository
  uda ingest . --verbose                also list every file left out, with its reason
  uda ingest . --format json            the report as one JSON object, for scripts
  uda ingest docs --max-file-size 5000000   load text files up to 5 MB

Every file that is not loaded is counted by reason ("3 files skipped (binary 1, empty 2)");
a folder left out as a whole counts once. The reasons:
  binary               a NUL byte anywhere in the file
  not-utf8             not UTF-8 text (convert it, e.g. with iconv)
  empty                no text, or only front matter
  symlink              never followed: a link may lead outside the folder
  too-big              larger than --max-file-size (default {MAX_FILE_BYTES:,} bytes)
  unreadable           the file could not be read (permissions, I/O error)
  not-a-regular-file   a device, socket or pipe
  hidden-file          the name starts with '.'
  hidden-folder        the folder's name starts with '.' (.git, .venv ...)
  excluded-folder      node_modules, __pycache__, site-packages, *.egg-info
  virtual-environment  a folder with a pyvenv.cfg
  nested-repository    a git submodule or another repository inside this one
  ignored-by-git       left out by .gitignore, .git/info/exclude or core.excludesFile
  unsupported-type     not Markdown, reStructuredText or text (e.g. .png, .pdf)
  source-code          source code or configuration: add --include-code
  invalid-element      the file's element breaks an ontology rule (the detail says which)
"""


def add_ingest_parser(commands: Any) -> None:
    """`uda ingest` and its options."""
    ingest = commands.add_parser(
        "ingest",
        help="index a folder or git repository (incremental)",
        description="Load documents, decision records (docs/adr, docs/decisions) and git "
        "authors from PATH\nand write what changed. Files that disappeared since the last "
        "run become tombstones.\nPrints one summary line, in which every file left out is "
        "counted by its reason.",
        epilog=INGEST_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ingest.add_argument("source", type=Path, metavar="PATH")
    ingest.add_argument("--include-code", action="store_true", help="index source code too")
    ingest.add_argument(
        "--policy",
        type=Path,
        default=None,
        help="a .uda-policy.toml giving sensitivity and scope by path glob",
    )
    ingest.add_argument(
        "--keep-deleted",
        action="store_true",
        help="do not tombstone elements whose files disappeared",
    )
    ingest.add_argument("--batch", type=int, default=64, help="elements per write batch")
    ingest.add_argument(
        "--max-file-size",
        type=int,
        default=MAX_FILE_BYTES,
        metavar="BYTES",
        help="skip larger files as too-big; a plain number of bytes, at least 1 "
        f"(default: {MAX_FILE_BYTES}, 1 MiB)",
    )
    ingest.add_argument(
        "--verbose",
        action="store_true",
        help="after the summary, list every skipped file or folder, one per line, sorted by "
        "path: `skipped PATH (REASON): DETAIL`",
    )
    ingest.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help="json: print the report as one JSON object instead (its counts, `skipped` as "
        "{path, reason, detail} objects, `skipped_by_reason`); it lists every skip, so "
        "--verbose adds nothing",
    )
    ingest.add_argument(
        "--cluster",
        default=None,
        metavar="ADDRESS",
        help="a Dask scheduler (tcp://host:8786) whose workers embed the documents; the "
        "writes stay here and stay idempotent: a lost worker or an interrupted run loses "
        "nothing, run it again (default: the profile's [uda] cluster, else this process)",
    )


def run_ingest(client: Any, args: argparse.Namespace) -> int:
    """Run `uda ingest` on `client`'s store."""
    from tqdm import tqdm

    _check_ingest_args(args)
    # The bar appears once the folder is loaded, when the number of elements is known.
    bars: list[tqdm[Any]] = []

    def progress(done: int, total: int) -> None:
        if not bars:
            bars.append(
                tqdm(
                    total=total,
                    unit="element",
                    desc="ingest",
                    disable=not sys.stderr.isatty(),
                    file=sys.stderr,
                )
            )
        bars[0].update(done - bars[0].n)
        if done >= total:
            bars[0].close()

    started = time.perf_counter()
    try:
        report = client.ingest_source(
            args.source,
            include_code=args.include_code,
            policy=args.policy,
            max_file_bytes=args.max_file_size,
            batch_size=args.batch,
            tombstone_vanished=not args.keep_deleted,
            progress=progress,
        )
    finally:
        for bar in bars:
            bar.close()
    seconds = time.perf_counter() - started
    if args.format == "json":
        print(json.dumps({**report.to_dict(), "seconds": round(seconds, 3)}, indent=2))
        return EXIT_OK
    print(_ingest_summary(report, seconds))
    if args.verbose:
        for entry in sorted(report.skipped):
            print(f"skipped {entry.path} ({entry.reason}): {entry.detail}")
    return EXIT_OK


def _check_ingest_args(args: argparse.Namespace) -> None:
    if not args.source.is_dir():
        raise CliError(
            f"{args.source} is not a folder: give a directory or a git repository",
            field="PATH",
            value=str(args.source),
        )
    if args.batch < 1:
        raise CliError(
            f"--batch {args.batch}: give at least 1 element per batch",
            field="--batch",
            value=args.batch,
        )
    if args.max_file_size < 1:
        raise CliError(
            f"--max-file-size {args.max_file_size}: give at least 1 byte "
            f"(default {MAX_FILE_BYTES}, 1 MiB)",
            field="--max-file-size",
            value=args.max_file_size,
        )


def _ingest_summary(report: SourceIngestReport, seconds: float) -> str:
    """The one line `uda ingest` prints; scripts and the README read "N files skipped"."""
    by_reason = report.skipped_by_reason()
    reasons = ", ".join(f"{code} {count}" for code, count in by_reason.items())
    return (
        f"{report.repository}: {report.written} elements written, "
        f"{report.unchanged} unchanged, {report.deleted} deleted; "
        f"{report.chunks} chunks ({report.embedded} embedded, {report.reused} reused); "
        f"{report.edges} new edges; {len(report.skipped)} files skipped"
        + (f" ({reasons})" if reasons else "")
        + f"; {seconds:.1f} s"
    )
