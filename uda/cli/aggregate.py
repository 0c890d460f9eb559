"""`uda aggregate`: counts (and min, max, avg) of the visible matches by group.

    uda aggregate --temporal timestamp:month                        how many per month
    uda aggregate --where '{"status": "accepted"}' --group-by partOf.name --temporal
        timestamp:quarter --cumulative                               running totals per repo
    uda aggregate --group-by element_type --metric max:timestamp     newest per type
    uda aggregate "payment retries" --top-n 50 --group-by status     over a query's top 50

A bad flag or field exits 2 with one line naming it, as `uda search` does.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path
from typing import Any

from uda.cli.search import context_filters_of, parse_as_of
from uda.errors import InvalidRequestError
from uda.query.aggregates import AggregateRequest, AggregateResponse, aggregate_request

EXIT_OK = 0
METRICS = ("count", "min", "max", "avg")


def add_aggregate_parser(commands: Any) -> argparse.ArgumentParser:
    """Add the `aggregate` command to the `uda` parser's subcommands."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "aggregate",
        help="count the matches by group, period or metric",
        description="Count (or take the min, max or average of a field over) every visible "
        "match of the filters, by group keys and calendar periods (UTC); with QUERY, over "
        "the ranked search's top results. Groups you may not see do not appear.",
        epilog=__doc__.split("\n\n")[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "query", metavar="QUERY", nargs="?", default=None, help="aggregate a search's top results"
    )
    parser.add_argument(
        "--where", metavar="JSON|@FILE", help="a filter tree, as for `uda search --where`"
    )
    parser.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="FIELD[OP]VALUE",
        help="e.g. element_type=Decision; ANDed with --where",
    )
    parser.add_argument(
        "--group-by",
        action="append",
        default=[],
        metavar="FIELD",
        help="a field or relation path (partOf.name, ~governedBy.name); repeat for more keys",
    )
    parser.add_argument(
        "--temporal",
        metavar="FIELD:UNIT",
        help="bucket by period of a datetime or date field: day, week, month, quarter, year",
    )
    parser.add_argument(
        "--metric",
        default="count",
        metavar="count|min:F|max:F|avg:F",
        help="what to compute per group (default: count)",
    )
    parser.add_argument("--cumulative", action="store_true", help="running values over the periods")
    parser.add_argument(
        "--top-n", type=int, default=None, help="with QUERY: how many top results (1-1000)"
    )
    parser.add_argument(
        "--type", action="append", default=None, dest="element_types", metavar="TYPE"
    )
    parser.add_argument(
        "--clearance",
        action="append",
        default=None,
        metavar="ENTRY",
        help="a level or project:<name> / project:*; repeat or comma-separate (default: internal)",
    )
    parser.add_argument("--as-of", default=None, metavar="WHEN", help="ISO datetime or HLC")
    parser.add_argument("--format", choices=["table", "json", "arrow", "csv"], default="table")
    parser.add_argument("--output", type=Path, default=None, help="write to this file")
    return parser


def _error(flag: str, message: str, value: Any) -> InvalidRequestError:
    return InvalidRequestError(f"{flag} {value!r}: {message}", field=flag, value=value)


def _metric(text: str) -> dict[str, Any]:
    name, _, field = text.partition(":")
    if name not in METRICS or (name == "count") != (not field):
        raise _error("--metric", "write count, min:FIELD, max:FIELD or avg:FIELD", text)
    return {"metric": name} if name == "count" else {"metric": name, "metric_field": field}


def request_of(args: argparse.Namespace) -> AggregateRequest:
    """The aggregate the flags ask for.

    Raises:
        InvalidRequestError: a malformed flag, naming it.
    """
    filters = context_filters_of(args)
    options: dict[str, Any] = {"group_by": list(args.group_by), **_metric(args.metric)}
    if args.temporal is not None:
        field, sep, unit = str(args.temporal).rpartition(":")
        if not sep or not field:
            raise _error("--temporal", "write FIELD:UNIT, e.g. timestamp:month", args.temporal)
        options["temporal"] = (field, unit)
    if args.cumulative:
        options["cumulative"] = True
    if args.top_n is not None:
        options["top_n"] = args.top_n
    if args.element_types:
        options["element_types"] = args.element_types
    if args.as_of is not None:
        options["as_of"] = parse_as_of(args.as_of)
    clearance = [
        e.strip()
        for entry in (args.clearance or ["internal"])
        for e in entry.split(",")
        if e.strip()
    ]
    return aggregate_request(args.query, clearance, filters, **options)


def table(response: AggregateResponse) -> str:
    """The rows as an aligned text table, with what was counted."""
    names = [c.name for c in response.columns]
    cells = [[_cell(row.get(name)) for name in names] for row in response.rows]
    widths = [max([len(n), *(len(r[i]) for r in cells)]) for i, n in enumerate(names)]
    lines = ["  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    if not cells:
        lines.append("(no visible matches)")
    lines.append(f"\n{response.matched} matches counted ({response.path})")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def as_csv(response: AggregateResponse) -> str:
    """The rows as CSV with a header (an empty cell for a missing value)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    names = [c.name for c in response.columns]
    writer.writerow(names)
    for row in response.rows:
        writer.writerow(["" if row.get(n) is None else row.get(n) for n in names])
    return out.getvalue().rstrip("\n")


def run_aggregate(client: Any, args: argparse.Namespace) -> int:
    """Run `uda aggregate` on an open client; returns the exit code."""
    from uda.cli.render import refuse_binary_on_terminal  # pyarrow: only when it runs

    refuse_binary_on_terminal(args)
    response: AggregateResponse = client.run_aggregate(request_of(args))
    if args.format == "arrow":
        import pyarrow as pa

        data = response.to_arrow()
        buffer = io.BytesIO()
        with pa.ipc.new_stream(buffer, data.schema) as writer:
            writer.write_table(data)
        if args.output is not None:
            args.output.write_bytes(buffer.getvalue())
        else:
            sys.stdout.buffer.write(buffer.getvalue())
            sys.stdout.buffer.flush()
        return EXIT_OK
    if args.format == "json":
        text = json.dumps(response.to_dict(), indent=2, ensure_ascii=False)
    elif args.format == "csv":
        text = as_csv(response)
    else:
        text = table(response)
    if args.output is None:
        print(text)
    else:
        args.output.write_text(text + "\n", encoding="utf-8")
    return EXIT_OK


__all__ = ["add_aggregate_parser", "as_csv", "request_of", "run_aggregate", "table"]
