"""The `uda` command: ingest a repository, search it, check and repair the stores.

Exit codes scripts can rely on: 0 success; 1 `check` found differences; 2 a usage or input
error (bad flag, bad query, unknown clearance); 3 a backend failed; 130 interrupted.
Errors print one line naming the problem and the fix; `--debug` prints the traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from uda.agent.mcp_server import add_mcp_parser, run_mcp
from uda.cli import data
from uda.cli.aggregate import add_aggregate_parser, run_aggregate
from uda.cli.embed_server import add_embed_server_parser, run_embed_server
from uda.cli.exits import (
    EXIT_BACKEND,
    EXIT_DIFFERENCES,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
)
from uda.cli.ingest import add_ingest_parser, run_ingest
from uda.cli.render import emit
from uda.cli.search import (
    add_search_parsers,
    run_rerun,
    run_search,
)
from uda.cli.tune import add_tune_parser, run_tune
from uda.cli.tune import summary as tuning_summary
from uda.errors import ConnectorError, PlanError, StoresBehindError, UDAError, UserError
from uda.http.serve import add_serve_parser, run_serve

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
  uda tune                                      choose the graph's weight on your own data
  uda --path /data/uda stats                    use another data folder
  uda serve --keys keys.toml --port 8080        the HTTP service (JSON and Arrow)
  uda mcp --clearance internal                  the agent tools for an MCP client (stdio)
  uda embed-server --port 8081                  one embedding model shared over HTTP

The data folder defaults to ./.uda (or $UDA_PATH); --profile names a .toml profile, or
the URL of a running `uda serve` for search, rerun, aggregate, export and fields (its key
in $UDA_API_KEY, or a bearer token in $UDA_TOKEN).
"""


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
        default=None,
        metavar="FILE|URL",
        help="a .toml profile naming connectors and search defaults, or the URL of a running "
        "`uda serve` (http://host:port) for search, rerun, aggregate, export and fields",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    add_ingest_parser(commands)

    add_search_parsers(commands, EPILOG)

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
    services.add_argument(
        "action",
        choices=["up", "down", "status", "promote"],
        help="promote: the primary is lost, make a standby the primary (the one that "
        "received the most WAL, or --standby N); the others follow it, and the next `up` "
        "brings the old primary back as a standby (pg_rewind)",
    )
    services.add_argument(
        "--root",
        type=Path,
        default=None,
        help="where the servers keep their data (default: <data folder>/services)",
    )
    services.add_argument(
        "--replicas",
        type=int,
        default=None,
        metavar="N",
        help="with `up`: run N hot standbys of PostgreSQL (streaming replication) and list "
        "them in the profile: searches read there, never staler than the primary; fewer "
        "than before stops and deletes the extra copies (default: as many as last time)",
    )
    services.add_argument(
        "--standby",
        type=int,
        default=None,
        metavar="N",
        help="with `promote`: which standby (postgres-standby-N)",
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
    add_embed_server_parser(commands)
    add_mcp_parser(commands)
    add_aggregate_parser(commands)
    add_tune_parser(commands)
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


# Commands that need the store itself (its system of record), not only its answers.
_STORE_COMMANDS = frozenset({"ingest", "check", "sync", "stats", "tune"})


def _connect(args: argparse.Namespace) -> Any:
    import uda
    from uda.client import Client, is_url
    from uda.config import load_profile

    # A string, not a Path: a Path would fold "http://" into "http:/", and a URL would then be
    # taken for a folder, an empty local store.
    if args.profile is not None and is_url(args.profile):
        if args.command in _STORE_COMMANDS:
            raise CliError(
                f"uda {args.command} works on a store's profile, not on a remote service: "
                "run it where the store's profile is",
                field="--profile",
                value=args.profile,
            )
        if args.path is not None:
            raise CliError(
                "--path names a local store's folder; a remote service keeps its own",
                field="--path",
                value=str(args.path),
            )
        # The service's key comes from $UDA_API_KEY or $UDA_TOKEN (uda.http.remote), never
        # from the command line, where other users of the machine could read it.
        return uda.connect(args.profile)
    if args.profile is not None:
        profile = load_profile(Path(args.profile), path=args.path)
    else:
        profile = load_profile(path=args.path or os.environ.get("UDA_PATH") or ".uda")
    cluster = getattr(args, "cluster", None)
    if cluster is not None:
        profile = dataclasses.replace(profile, cluster=cluster)
    return Client(profile)


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
    if args.command == "embed-server":
        return run_embed_server(args)
    if args.command == "ontology":
        from ontology import json_schema

        emit(json.dumps(json_schema(), indent=2), args.output)
        return EXIT_OK
    with _connect(args) as client:
        if args.command in data.COMMANDS:
            return data.run_data(client, args)
        if args.command == "ingest":
            return run_ingest(client, args)
        if args.command == "search":
            return run_search(client, args)
        if args.command == "aggregate":
            return run_aggregate(client, args)
        if args.command == "rerun":
            return run_rerun(client, args)
        if args.command == "tune":
            return run_tune(client, args)
        if args.command == "check":
            report = client.check()
            print(report)
            return EXIT_OK if report.clean else EXIT_DIFFERENCES
        if args.command == "sync":
            print(client.repair())
            return EXIT_OK
        stats = client.stats()
        stats["tuning"] = tuning_summary(stats.get("tuning"))
        print("\n".join(f"{key:>10}: {_stat(value)}" for key, value in stats.items()))
        return EXIT_OK


def _stat(value: object) -> str:
    """A figure of `uda stats`; a group (the graph's shape) as `name value` pairs."""
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in cast("dict[str, object]", value).items())
    return str(value)


def _services(args: argparse.Namespace) -> int:
    from uda.services import manage

    data = Path(args.path or os.environ.get("UDA_PATH") or ".uda")
    root: Path = args.root or data / "services"
    if args.action == "up":
        names = (*manage.DEFAULT, "chroma") if args.with_chroma else manage.DEFAULT
        if args.replicas is not None and args.replicas < 0:
            raise CliError(
                f"--replicas {args.replicas}: give 0 or more standbys",
                field="--replicas",
                value=args.replicas,
            )
        infos, standby_infos, profile = manage.up(root, names, replicas=args.replicas)
        for name, info in infos.items():
            print(f"{name:>9}: running on {info.host}:{info.port} (pid {info.pid})")
        for number, info in enumerate(standby_infos, start=1):
            print(f"  standby {number}: running on {info.host}:{info.port} (pid {info.pid})")
        print(
            f"profile written to {profile}\nnext: uda --profile {profile} ingest . && "
            f'uda --profile {profile} search "..."'
        )
        return EXIT_OK
    if args.action == "promote":
        from uda.services import postgres_failover

        promoted = postgres_failover.promote(root, args.standby)
        where = f" on port {promoted.info.port}" if promoted.info else ""
        print(
            f"{promoted.node.home.name} is the primary{where}; the other standbys follow it.\n"
            "next: `uda services up` brings the former primary back as a standby; clients "
            "of the profile find the new primary by themselves"
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
