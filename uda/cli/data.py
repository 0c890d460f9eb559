"""`uda export` and `uda fields`: every match of a search to a file, and what filters can name.

`uda export` writes a structured retrieval (no QUERY: `--where`, `--filter`, `--order-by`)
or a ranked search (QUERY) to `--output` as Parquet, Arrow IPC or CSV, a page at a time,
up to `--max-rows`; the rows, and whether the cap cut the answer short, are reported on
standard error (with a progress bar while it runs, on a terminal). `uda fields [PREFIX]`
lists the filterable paths with their types, operators, whether `--order-by` takes them and
the values the clearance may see. (`uda ontology export`, the JSON Schema of the element
types, is a different command and stays as it was.)

The filter options are read by the `uda search` helpers, handed over by `uda.cli.commands`
(this module does not import it: the command imports this one).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from uda.cli.exits import EXIT_BACKEND, EXIT_OK
from uda.cli.search import add_strict, context_filters_of, parse_as_of
from uda.errors import InvalidRequestError
from uda.query.discovery import MAX_LISTED_VALUES, FilterPath
from uda.query.export import DEFAULT_MAX_ROWS, EXTENSIONS, FORMATS, ExportReport

COMMANDS = frozenset({"export", "fields"})
DEFAULT_CLEARANCE = "internal"  # as `uda search`


def _clearance_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--clearance",
        action="append",
        default=None,
        metavar="ENTRY",
        help="a level (public, internal, confidential, restricted) or project:<name> / "
        "project:*; repeat or comma-separate (default: internal)",
    )


def add_data_parsers(commands: Any) -> None:
    """Add `export` and `fields` to the `uda` command's subparsers."""
    export: argparse.ArgumentParser = commands.add_parser(
        "export",
        help="write every match of a search to a Parquet, Arrow or CSV file",
        description="Write every match of a structured retrieval (no QUERY) or a ranked "
        "search (QUERY, through a pool of 1,000) to --output, a page at a time, up to "
        "--max-rows rows. CSV flattens properties to properties.<field> columns and writes "
        "extras and context_nodes as JSON. The count, and whether --max-rows cut the answer "
        "short, go to standard error.",
    )
    export.add_argument("query", metavar="QUERY", nargs="?", default=None)
    export.add_argument(
        "--format",
        choices=FORMATS,
        default=None,
        help="parquet, arrow (an Arrow IPC stream) or csv (default: from --output's suffix)",
    )
    export.add_argument(
        "--output",
        required=True,
        metavar="FILE",
        help="the file to write (written whole or not at all); '-' for standard output",
    )
    export.add_argument(
        "--max-rows",
        type=int,
        default=DEFAULT_MAX_ROWS,
        help=f"stop after this many rows (default {DEFAULT_MAX_ROWS:,})",
    )
    _clearance_option(export)
    export.add_argument(
        "--filter", action="append", default=[], metavar="FIELD[OP]VALUE", help="as for search"
    )
    export.add_argument("--where", metavar="JSON|@FILE", help="a filter tree, as for search")
    export.add_argument(
        "--type", action="append", default=None, dest="element_types", metavar="TYPE"
    )
    export.add_argument(
        "--order-by",
        default=None,
        metavar="KEY",
        help="the order of a structured export ('-' first for descending: --order-by=-timestamp)",
    )
    export.add_argument(
        "--depth",
        type=int,
        default=None,
        help="graph hops for context (0-2; default: the automatic mode's, 1 or 2, see explain)",
    )
    export.add_argument("--as-of", default=None, metavar="WHEN", help="as for search")
    export.add_argument(
        "--pool-size",
        type=int,
        default=None,
        help="a ranked export's candidate pool (default and most: 1000)",
    )
    add_strict(export)

    fields: argparse.ArgumentParser = commands.add_parser(
        "fields",
        help="list the paths filters may name, with types, operators and visible values",
        description="Every filterable path starting with PREFIX (all without one): own "
        "fields and relation paths such as partOf.name or ~governedBy.status, with the "
        "type, the operators, whether --order-by takes it and, for few distinct values, "
        "those your clearance may see with their counts. An unknown PREFIX lists nothing.",
    )
    fields.add_argument("prefix", metavar="PREFIX", nargs="?", default=None)
    _clearance_option(fields)
    fields.add_argument("--format", choices=["table", "json"], default="table")
    fields.add_argument(
        "--no-values", action="store_true", help="skip counting values (no store scan)"
    )


def _clearance(args: argparse.Namespace) -> list[str]:
    return [
        e.strip()
        for entry in (args.clearance or [DEFAULT_CLEARANCE])
        for e in entry.split(",")
        if e.strip()
    ]


def run_data(client: Any, args: argparse.Namespace) -> int:
    """Run `uda export` or `uda fields` on an open client; returns the exit code.

    Raises:
        UserError: a bad option or request (the command maps it to exit 2).
    """
    if args.command == "fields":
        return _fields(client, args)
    filters = context_filters_of(args)
    options: dict[str, Any] = {} if args.depth is None else {"expand_depth": args.depth}
    for name, value in (
        ("element_types", args.element_types),
        ("order_by", args.order_by),
        ("as_of", parse_as_of(args.as_of)),
        ("pool_size", args.pool_size),
    ):
        if value is not None:
            options[name] = value
    return _export(client, args, filters, options)


def _format_of(args: argparse.Namespace) -> str:
    if args.format is not None:
        return str(args.format)
    known = {**{ext: name for name, ext in EXTENSIONS.items()}, ".arrows": "arrow", ".ipc": "arrow"}
    found = known.get(Path(args.output).suffix.lower())
    if found is not None:
        return found
    raise InvalidRequestError(
        f"--format: cannot tell the format from {args.output!r}; add --format {'|'.join(FORMATS)}",
        field="--format",
        value=args.output,
    )


def _export(
    client: Any, args: argparse.Namespace, filters: dict[str, Any], options: dict[str, Any]
) -> int:
    from tqdm import tqdm

    kind = _format_of(args)
    to_stdout = args.output == "-"
    if to_stdout and kind != "csv" and sys.stdout.isatty():
        raise InvalidRequestError(
            f"--format {kind} writes binary: give --output FILE or pipe standard output",
            field="--output",
            value="-",
        )
    bar = tqdm(unit="row", desc="export", file=sys.stderr, disable=not sys.stderr.isatty())

    def progress(rows: int) -> None:
        bar.update(rows - bar.n)

    try:
        report: ExportReport = client.export(
            args.query,
            _clearance(args),
            filters,
            format=kind,
            sink=sys.stdout.buffer if to_stdout else Path(args.output),
            max_rows=args.max_rows,
            progress=progress,
            **options,
        )
    finally:
        bar.close()
    if to_stdout:
        sys.stdout.buffer.flush()
    where = "standard output" if to_stdout else args.output
    line = f"uda export: {report.rows:,} rows written to {where} ({report.format})"
    if report.truncated:
        line += f"; stopped at --max-rows {args.max_rows:,}: more rows match"
    print(line, file=sys.stderr)
    for d in report.degraded:
        print(f"warning: degraded export: {d.describe()}", file=sys.stderr)
    return EXIT_BACKEND if report.degraded and args.strict else EXIT_OK


def _values(path: FilterPath) -> str:
    if path.many_values:
        return f"(more than {MAX_LISTED_VALUES} values)"
    if path.values is None:
        return ""
    if not path.values:
        return "(none you may see)"
    return ", ".join(f"{v.value}={v.count}" for v in path.values)


def fields_table(paths: Sequence[FilterPath]) -> str:
    """The paths as a table: path, type, orderable, operators, values."""
    header = ("PATH", "TYPE", "ORDER", "OPERATORS", "VALUES")
    rows = [
        (
            p.path,
            p.type,
            "yes" if p.orderable else "",
            " ".join(op.removeprefix("$") for op in p.operators),
            _values(p),
        )
        for p in paths
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    return "\n".join(
        "  ".join(cell.ljust(widths[i]) if i < 4 else cell for i, cell in enumerate(row)).rstrip()
        for row in [header, *rows]
    )


def _fields(client: Any, args: argparse.Namespace) -> int:
    paths: list[FilterPath] = client.fields(
        args.prefix, _clearance(args), values=not args.no_values
    )
    if args.format == "json":
        print(json.dumps([p.model_dump(mode="json") for p in paths], indent=2))
    elif paths:
        print(fields_table(paths))
    else:
        print(f"no filterable path starts with {args.prefix!r}; `uda fields` lists them all")
    return 0


__all__ = ["COMMANDS", "add_data_parsers", "fields_table", "run_data"]
