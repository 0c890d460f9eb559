"""The `uda` command: ingest a repository, search it, check and repair the stores.

Exit codes scripts can rely on: 0 success; 1 `check` found differences; 2 a usage or input
error (bad flag, bad query, unknown clearance); 3 a backend failed; 130 interrupted.
Errors print one line naming the problem and the fix; `--debug` prints the traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
import typing
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from uda.agent.mcp_server import add_mcp_parser, run_mcp
from uda.cli import data
from uda.cli.aggregate import add_aggregate_parser, run_aggregate
from uda.errors import ConnectorError, PlanError, StoresBehindError, UDAError, UserError
from uda.http.serve import add_serve_parser, run_serve

EXIT_OK, EXIT_DIFFERENCES, EXIT_USAGE, EXIT_BACKEND, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

EPILOG = """\
examples:
  uda ingest .                                  index this repository (docs, ADRs, history)
  uda search "why do we retry payments?"        top results as a table (internal clearance)
  uda search "retries" --clearance public --limit 3 --format json
  uda search "decision on storage" --filter element_type=Decision --explain
  uda search "retries" --filter "timestamp>=2025-01-01" --depth 2
  uda search "retries" --where '{"$or": [{"status": "accepted"}, {"partOf.name": "payments"}]}'
  uda search "retries" --where @filters.json    a filter tree from a file
  uda search "retries" --as-of 2025-06-01T00:00:00Z   the answer as it was then
  uda search "retries" --format arrow --output results.arrow
  uda search --where '{"status": "accepted"}' --order-by=-timestamp   newest first, no query
  uda search --order-by=-timestamp --limit 20 --cursor CURSOR   the next page
  uda search --type Decision --order-by name --all --format json   every page
  uda export --where '{"status": "accepted"}' --order-by=-timestamp --output accepted.parquet
  uda fields partOf.                            the paths filters may name, with their values
  uda check && uda sync                         verify every store, then repair
  uda --path /data/uda stats                    use another data folder
  uda serve --keys keys.toml --port 8080        the HTTP service (JSON and Arrow)
  uda mcp --clearance internal                  the agent tools for an MCP client (stdio)

The data folder defaults to ./.uda (or $UDA_PATH); --profile names a .toml profile.
"""


class CliError(UserError):
    """A usage mistake the command line itself detects."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="uda",
        description="UDA: one clearance-aware search over your documents, decisions and "
        "their graph.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--path",
        type=Path,
        default=None,
        help="data folder of the embedded profile (default: $UDA_PATH or ./.uda)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="a .toml profile naming connectors and search defaults",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    ingest = commands.add_parser(
        "ingest",
        help="index a folder or git repository (incremental)",
        description="Load documents, decision records (docs/adr, docs/decisions) and git "
        "authors from PATH and write what changed. Files that disappeared since the last "
        "run become tombstones.",
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

    search = commands.add_parser(
        "search",
        help="ask a question",
        description="Search every backend; results respect the clearance you give.",
        epilog=EPILOG,
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
    search.add_argument("--depth", type=int, default=1, help="graph hops for context (0-2)")
    search.add_argument(
        "--as-of",
        default=None,
        metavar="WHEN",
        help="an ISO datetime or an HLC stamp: search the state of that time",
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
    _add_strict(search)

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
    _add_strict(rerun)

    commands.add_parser(
        "check",
        help="compare every store with the system of record",
        description="Exit 1 and list the differences if any store disagrees.",
    )
    commands.add_parser(
        "sync",
        help="repair the stores from the system of record",
        description="Finish interrupted writes and repair every difference `check` reports.",
    )
    commands.add_parser("stats", help="counts of elements, chunks, edges, pending writes")
    ontology = commands.add_parser("ontology", help="the element model")
    ontology_commands = ontology.add_subparsers(dest="ontology_command", required=True)
    export = ontology_commands.add_parser("export", help="JSON Schema of every element type")
    export.add_argument("--output", type=Path, default=None)
    commands.add_parser("demo", help="ingest this project's own docs and answer questions")
    services = commands.add_parser(
        "services",
        help="start or stop the server profile's databases (no Docker needed)",
        description="Start PostgreSQL+pgvector and ArcadeDB (and, with --with-chroma, a "
        "Chroma server) on loopback from the installed packages, with generated credentials "
        "and data under --root; `up` writes <root>/server.toml, a profile to pass as "
        "`uda --profile <root>/server.toml ...`.",
    )
    services.add_argument("action", choices=["up", "down", "status"])
    services.add_argument(
        "--root",
        type=Path,
        default=None,
        help="where the servers keep their data (default: <data folder>/services)",
    )
    services.add_argument(
        "--with-chroma",
        action="store_true",
        help="also start a Chroma server as a second vector store",
    )
    services.add_argument(
        "--purge",
        action="store_true",
        help="with `down`: also delete the servers' data and the profile (cannot be undone)",
    )
    add_serve_parser(commands)
    add_mcp_parser(commands)
    add_aggregate_parser(commands)
    data.add_data_parsers(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return _dispatch(args)
    except KeyboardInterrupt:
        print("uda: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except UserError as exc:
        return _fail(args, exc, EXIT_USAGE)
    except StoresBehindError as exc:  # its message says what to run: `uda sync`
        return _fail(args, exc, EXIT_BACKEND)
    except (ConnectorError, PlanError, UDAError) as exc:
        return _fail(args, exc, EXIT_BACKEND, hint="run `uda check`; --debug shows details")
    except OSError as exc:
        return _fail(args, exc, EXIT_USAGE)


def _fail(args: argparse.Namespace, exc: BaseException, code: int, hint: str = "") -> int:
    if args.debug:
        traceback.print_exc()
    message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    print(f"uda: error: {message}" + (f" ({hint})" if hint else ""), file=sys.stderr)
    return code


def _connect(args: argparse.Namespace) -> Any:
    import uda

    if args.profile is not None:
        return uda.connect(args.profile, path=args.path)
    return uda.connect(path=args.path or os.environ.get("UDA_PATH") or ".uda")


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "demo":
        from uda.demo import main as demo_main

        return demo_main()
    if args.command == "services":
        return _services(args)
    if args.command == "mcp":
        return run_mcp(args)
    if args.command == "serve":
        return run_serve(args)
    if args.command == "ontology":
        from ontology import json_schema

        _emit(json.dumps(json_schema(), indent=2), args.output)
        return EXIT_OK
    with _connect(args) as client:
        if args.command in data.COMMANDS:
            return data.run_data(
                client, args, parse_filter=_parse_filter, parse_where=_where, parse_as_of=_as_of
            )
        if args.command == "ingest":
            return _ingest(client, args)
        if args.command == "search":
            return _search(client, args)
        if args.command == "aggregate":
            return run_aggregate(client, args)
        if args.command == "rerun":
            return _rerun(client, args)
        if args.command == "check":
            report = client.check()
            print(report)
            return EXIT_OK if report.clean else EXIT_DIFFERENCES
        if args.command == "sync":
            print(client.repair())
            return EXIT_OK
        stats = client.stats()
        print("\n".join(f"{key:>10}: {value}" for key, value in stats.items()))
        return EXIT_OK


def _services(args: argparse.Namespace) -> int:
    from uda.services import manage

    data = Path(args.path or os.environ.get("UDA_PATH") or ".uda")
    root: Path = args.root or data / "services"
    if args.action == "up":
        names = (*manage.DEFAULT, "chroma") if args.with_chroma else manage.DEFAULT
        infos, profile = manage.up(root, names)
        for name, info in infos.items():
            print(f"{name:>9}: running on {info.host}:{info.port} (pid {info.pid})")
        print(
            f"profile written to {profile}\nnext: uda --profile {profile} ingest . && "
            f'uda --profile {profile} search "..."'
        )
        return EXIT_OK
    if args.action == "down":
        stopped = manage.down(root, purge=args.purge)
        verb = "stopped and deleted" if args.purge else "stopped"
        print(f"{verb}: " + (", ".join(stopped) or "nothing was running"))
        return EXIT_OK
    states = manage.status(root)
    if not states:
        print(f"no services under {root}; start them with `uda services up`")
        return EXIT_DIFFERENCES
    for name, info in states.items():
        print(
            f"{name:>9}: "
            + (f"running on {info.host}:{info.port} (pid {info.pid})" if info else "stopped")
        )
    return EXIT_OK if all(states.values()) else EXIT_DIFFERENCES


def _ingest(client: Any, args: argparse.Namespace) -> int:
    from tqdm import tqdm

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
            batch_size=args.batch,
            tombstone_vanished=not args.keep_deleted,
            progress=progress,
        )
    finally:
        for bar in bars:
            bar.close()
    print(
        f"{report.repository}: {report.written} elements written, "
        f"{report.unchanged} unchanged, {report.deleted} deleted; "
        f"{report.chunks} chunks ({report.embedded} embedded, {report.reused} reused); "
        f"{report.edges} new edges; {len(report.skipped)} files skipped; "
        f"{time.perf_counter() - started:.1f} s"
    )
    return EXIT_OK


def _parse_filter(text: str) -> tuple[str, dict[str, Any]]:
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


def _where(text: str) -> dict[str, Any]:
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


def _as_of(raw: str | None) -> int | datetime | None:
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


def _add_strict(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--strict",
        action="store_true",
        help="exit 3 when the answer is degraded (a backend failed or was too late and was "
        "left out); without it the answer is printed with a warning and the exit is 0",
    )


def _search(client: Any, args: argparse.Namespace) -> int:

    clearance = [
        e.strip()
        for entry in (args.clearance or ["internal"])
        for e in entry.split(",")
        if e.strip()
    ]
    flat: dict[str, dict[str, Any]] = {}
    for text in args.filter:
        field, condition = _parse_filter(text)
        flat.setdefault(field, {}).update(condition)
    filters: dict[str, Any] = dict(flat)
    if args.where is not None:
        where = _where(args.where)
        filters = {"$and": [where, flat]} if flat else where
    options: dict[str, Any] = {"expand_depth": args.depth}
    if args.element_types:
        options["element_types"] = args.element_types
    as_of = _as_of(args.as_of)
    if as_of is not None:
        options["as_of"] = as_of
    if args.order_by is not None:
        options["order_by"] = args.order_by
    if args.timeout is not None:
        options["timeout"] = args.timeout
    from uda.cli.render import refuse_binary_on_terminal

    refuse_binary_on_terminal(args)
    pages = _pages(client, args, clearance, filters, options)
    return _print_pages(pages, args, ranked=args.query is not None)


def _rerun(client: Any, args: argparse.Namespace) -> int:
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
        _emit(cli_format.as_json(pages, explain=args.explain), args.output)
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
    _emit(text, args.output)
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


def _emit(text: str, output: Path | None) -> None:
    if output is None:
        print(text)
    else:
        output.write_text(text + "\n")
