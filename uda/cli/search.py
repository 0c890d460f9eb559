"""`uda search` and `uda rerun`: the search options, their parsing, and printing pages.

The filter options (`--filter`, `--where`, `--as-of`) are parsed here for every command that
takes them (`uda export` too, through `uda.cli.data`).
"""

from __future__ import annotations

import argparse
import json
import sys
import typing
from datetime import datetime
from pathlib import Path
from typing import Any

from uda.cli.exits import EXIT_BACKEND, EXIT_OK, CliError
from uda.cli.render import emit
from uda.query import bounds


def add_search_parsers(commands: Any, epilog: str) -> None:
    """The `search` and `rerun` subcommands."""
    search = commands.add_parser(
        "search",
        help="ask a question",
        description="Search every backend; results respect the clearance you give.",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    search.add_argument(
        "query",
        metavar="QUERY",
        nargs="?",
        default=None,
        help="what to look for; leave it out for a structured retrieval (--where, --filter, "
        "--order-by): every match, in order",
    )
    search.add_argument("--limit", type=int, default=5, help="results per page (1-100)")
    search.add_argument(
        "--clearance",
        action="append",
        default=None,
        metavar="ENTRY",
        help="a level (public, internal, confidential, restricted) or "
        "project:<name> / project:*; repeat or comma-separate "
        "(default: internal)",
    )
    search.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="FIELD[OP]VALUE",
        help="e.g. element_type=Decision, status=accepted, "
        "timestamp>=2025-01-01; OP is one of = != > >= < <=",
    )
    search.add_argument(
        "--where",
        metavar="JSON|@FILE",
        help="a filter tree: leaves {field: value}, {field: [v1, v2]}, {field: {op: value}} "
        "with $eq $ne $gt $gte $lt $lte $in $nin $between $like $ilike $exists; nodes $and, "
        '$or, $not; relation paths such as "partOf.name" or "~governedBy.element_id". '
        "ANDed with every --filter",
    )
    search.add_argument(
        "--type",
        action="append",
        default=None,
        dest="element_types",
        metavar="TYPE",
        help="only these element types (Document, Decision...)",
    )
    search.add_argument(
        "--order-by",
        default=None,
        metavar="KEY",
        help="order a structured retrieval (no QUERY) by timestamp, name or any orderable field; "
        "'-' first for descending, written --order-by=-timestamp; ties by element_id "
        "(default: element_id)",
    )
    search.add_argument(
        "--cursor",
        default=None,
        help="the next page: the cursor a previous page printed, with the same query and options",
    )
    search.add_argument(
        "--all",
        action="store_true",
        dest="all_pages",
        help="follow the cursors to the last page (a ranked search: through its pool)",
    )
    search.add_argument(
        "--depth",
        type=int,
        default=None,
        help="graph hops for context (0-2; default: the automatic mode's, 1 or 2, see explain)",
    )
    search.add_argument(
        "--as-of",
        default=None,
        metavar="WHEN",
        help="an ISO datetime or an HLC stamp: search the state of that time",
    )
    search.add_argument(
        "--fields",
        action="append",
        default=None,
        metavar="NAME",
        help="properties to return whole (e.g. text); '*' for whole elements, context nodes "
        "too. By default long text is clipped (the profile's clip_chars, 1,000 characters) "
        "and each result's `truncated` gives the full lengths; repeat or comma-separate",
    )
    search.add_argument("--format", choices=["table", "json", "arrow"], default="table")
    search.add_argument(
        "--output", type=Path, default=None, help="write to this file instead of standard output"
    )
    search.add_argument(
        "--explain", action="store_true", help="show the plan and every leg's rank and contribution"
    )
    search.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long the whole search may take (default: the profile's search_timeout_s, "
        "5 s); a backend that cannot answer in time is left out and a warning says so",
    )
    add_strict(search)

    rerun = commands.add_parser(
        "rerun",
        help="answer a saved search again",
        description="Every search is saved under the query_id it printed (kept 30 days): "
        "its first page again, as it was answered then, or the page --cursor names.",
    )
    rerun.add_argument("query_id", metavar="QUERY_ID")
    rerun.add_argument("--cursor", default=None, help="a cursor the saved search printed")
    rerun.add_argument("--limit", type=int, default=None, help="results per page (1-100)")
    rerun.add_argument("--format", choices=["table", "json", "arrow"], default="table")
    rerun.add_argument("--output", type=Path, default=None, help="write to this file")
    rerun.add_argument("--explain", action="store_true", help="show the plan and every leg")
    add_strict(rerun)


def parse_filter(text: str) -> tuple[str, dict[str, Any]]:
    """`--filter FIELD[OP]VALUE` as `(field, {op: value})`."""
    for symbol, op in (
        ("!=", "$ne"),
        (">=", "$gte"),
        ("<=", "$lte"),
        (">", "$gt"),
        ("<", "$lt"),
        ("=", "$eq"),
    ):
        field, sep, raw = text.partition(symbol)
        if sep and field.strip():
            return field.strip(), {op: _value(raw.strip())}
    raise CliError(
        f"--filter {text!r}: write FIELD=VALUE (or !=, >, >=, <, <=)", field="--filter", value=text
    )


def parse_where(text: str) -> dict[str, Any]:
    """The `--where` filter tree, inline JSON or `@file`."""
    source = "--where"
    if text.startswith("@"):
        source = f"--where {text}"
        try:
            text = Path(text[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise CliError(f"{source}: {exc.strerror}", field="--where", value=text) from None
    try:
        tree = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"{source}: not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})",
            field="--where",
            value=text,
        ) from None
    except RecursionError:  # deeper than Python's parser goes: far beyond any bound
        raise CliError(
            f"{source}: lists and objects nest at most {bounds.MAX_DEPTH} deep",
            field="--where",
            value=bounds.short(text),
        ) from None
    if not isinstance(tree, dict):
        raise CliError(f"{source}: a filter tree is a JSON object", field="--where", value=text)
    return typing.cast("dict[str, Any]", tree)


def _value(raw: str) -> Any:
    # Numbers and booleans as JSON; anything else (dates, names) stays a string.
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return raw
    return value if isinstance(value, bool | int | float) else raw


def parse_as_of(raw: str | None) -> int | datetime | None:
    """`--as-of`: an HLC stamp (digits) or an ISO datetime; None when not given."""
    if raw is None:
        return None
    if raw.isdigit():
        return int(raw)
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise CliError(
            f"--as-of {raw!r}: give an ISO datetime (2025-06-01T00:00:00Z) or an HLC stamp",
            field="--as-of",
            value=raw,
        ) from None


def add_strict(parser: argparse.ArgumentParser) -> None:
    """`--strict`: a degraded answer exits 3 instead of warning."""
    parser.add_argument(
        "--strict",
        action="store_true",
        help="exit 3 when the answer is degraded (a backend failed or was too late and was "
        "left out); without it the answer is printed with a warning and the exit is 0 (a "
        "standby passed over is a warning only: another server gave the whole answer)",
    )


def context_filters_of(args: argparse.Namespace) -> dict[str, Any]:
    """Every `--filter` (ANDed) and the `--where` tree, as one `context_filters`.

    Raises:
        CliError: a malformed option, naming it.
    """
    flat: dict[str, dict[str, Any]] = {}
    for text in args.filter:
        field, condition = parse_filter(text)
        flat.setdefault(field, {}).update(condition)
    if args.where is None:
        return dict(flat)
    where = parse_where(args.where)
    return {"$and": [where, flat]} if flat else where


def run_search(client: Any, args: argparse.Namespace) -> int:
    """`uda search`: one page, the page `--cursor` names, or with `--all` every page."""
    clearance = [
        e.strip()
        for entry in (args.clearance or ["internal"])
        for e in entry.split(",")
        if e.strip()
    ]
    filters = context_filters_of(args)
    options: dict[str, Any] = {} if args.depth is None else {"expand_depth": args.depth}
    if args.element_types:
        options["element_types"] = args.element_types
    as_of = parse_as_of(args.as_of)
    if as_of is not None:
        options["as_of"] = as_of
    if args.order_by is not None:
        options["order_by"] = args.order_by
    if args.timeout is not None:
        options["timeout"] = args.timeout
    if args.fields is not None:
        options["fields"] = [f.strip() for entry in args.fields for f in entry.split(",")]
    from uda.cli.render import refuse_binary_on_terminal

    refuse_binary_on_terminal(args)
    pages = _pages(client, args, clearance, filters, options)
    return _print_pages(pages, args, ranked=args.query is not None)


def run_rerun(client: Any, args: argparse.Namespace) -> int:
    """`uda rerun QUERY_ID`: a saved search's first page again, or the page `--cursor` names."""
    from uda.cli.render import refuse_binary_on_terminal

    refuse_binary_on_terminal(args)
    page = client.rerun(args.query_id, cursor=args.cursor, limit=args.limit)
    return _print_pages([page], args, ranked=page.plan.order is None)


def _print_pages(pages: list[Any], args: argparse.Namespace, *, ranked: bool) -> int:
    """Print the pages; a degraded answer warns (and with --strict exits 3)."""
    from uda.cli import render as cli_format

    printed = _print_answer(pages, args, ranked=ranked)
    if cli_format.warn_if_degraded(pages) and args.strict:
        return EXIT_BACKEND
    return printed


def _print_answer(pages: list[Any], args: argparse.Namespace, *, ranked: bool) -> int:
    from uda.cli import render as cli_format

    if args.format == "arrow":
        if args.output is not None:
            with args.output.open("wb") as sink:
                cli_format.write_arrow(pages, sink)
        else:
            cli_format.write_arrow(pages, sys.stdout.buffer)
            sys.stdout.buffer.flush()
        return EXIT_OK
    if args.format == "json":
        emit(cli_format.as_json(pages, explain=args.explain), args.output)
        return EXIT_OK
    text = cli_format.table(pages, ranked=ranked)
    if args.explain:
        text += "\n\n" + "\n\n".join(str(page.explain()) for page in pages)
    query_id = pages[0].query_id
    if query_id is not None:
        text += f"\n\nquery_id: {query_id} (uda rerun {query_id})"
    cursor = pages[-1].next_cursor
    if cursor is not None:
        text += f"\nmore: add --cursor {cursor}" + (
            " (or --all for every page)" if args.command == "search" else ""
        )
    emit(text, args.output)
    return EXIT_OK


def _pages(
    client: Any,
    args: argparse.Namespace,
    clearance: list[str],
    filters: dict[str, Any],
    options: dict[str, Any],
) -> list[Any]:
    """The page `--cursor` names (the first without), or with `--all` it and every next one."""
    pages: list[Any] = []
    cursor: str | None = args.cursor
    while True:
        page = client.search(
            args.query,
            limit=args.limit,
            clearance_scope=clearance,
            context_filters=filters,
            cursor=cursor,
            **options,
        )
        pages.append(page)
        cursor = page.next_cursor
        if cursor is None or not args.all_pages:
            return pages


__all__ = [
    "add_search_parsers",
    "context_filters_of",
    "parse_as_of",
    "parse_filter",
    "parse_where",
    "run_rerun",
    "run_search",
]
