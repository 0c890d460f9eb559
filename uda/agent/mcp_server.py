"""`uda mcp`: the agent tools as a read-only MCP server over stdio.

The server offers the tools of `uda.agent.catalog.TOOLS` — the same names, descriptions
and argument schemas as the pydantic-ai toolset — and nothing that writes to the stores
(`export_query` writes a new file, and only with `--export-dir`, only there). The clearance
is fixed when the server starts (`--clearance`, default `public`): MCP clients are
whatever the user plugged in, so no tool argument may carry or widen it; arguments are
validated with `extra="forbid"` and an unknown field is an error result, not ignored.

Run it as `uda mcp --clearance internal` (or `python -m uda.agent.mcp_server`), and point
an MCP client at that command. One process serves one client, so the conversation state
(query ids) lives as long as the process.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp.server import Server

    from uda.agent.deps import Searcher
    from uda.client.async_client import AsyncClient

# Imports of mcp and pydantic stay inside the functions: `add_mcp_parser` runs whenever the
# `uda` command builds its parser, and must not need the `agent` extra.

DEFAULT_CLEARANCE = ("public",)


def _error(message: str) -> Any:
    import mcp.types as mt

    return mt.CallToolResult(content=[mt.TextContent(text=message)], is_error=True)


def _validation_message(name: str, exc: Exception) -> str:
    from pydantic import ValidationError

    if not isinstance(exc, ValidationError):
        return f"invalid arguments for {name}: {exc}"
    problems = [
        f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
    ]
    return f"invalid arguments for {name}: " + "; ".join(problems)


def build_mcp_server(
    client: Searcher,
    clearance_scope: Sequence[str] = DEFAULT_CLEARANCE,
    *,
    name: str = "uda",
    export_dir: str | os.PathLike[str] | None = None,
) -> Server[Any]:
    """An MCP server offering the read-only UDA tools over `client`, at a fixed clearance.

    Args:
        client: a `uda.AsyncClient` (or anything with its `run(request)`).
        clearance_scope: the clearance every call runs with (from configuration).
        name: the server's name as clients show it.
        export_dir: the one folder `export_query` may write files into (None: it refuses,
            and every tool is read-only).

    Raises:
        UnknownClearanceError: a clearance entry is not valid.
    """
    import mcp.types as mt
    from mcp.server import Server, ServerRequestContext
    from pydantic import ValidationError

    import uda
    from uda.agent.catalog import INSTRUCTIONS, TOOLS
    from uda.agent.deps import UDADeps
    from uda.errors import UDAError, UserError

    deps = UDADeps(client=client, clearance_scope=list(clearance_scope), export_dir=export_dir)
    specs = {spec.name: spec for spec in TOOLS}
    listed = [
        mt.Tool(
            name=spec.name,
            description=spec.description,
            input_schema=spec.args_model.model_json_schema(),
            output_schema=spec.result_model.model_json_schema(mode="serialization"),
            annotations=mt.ToolAnnotations(
                read_only_hint=not (spec.writes_files and export_dir is not None),
                destructive_hint=False,  # an export creates a new file, never overwrites
                idempotent_hint=not spec.writes_files,
                open_world_hint=False,
            ),
        )
        for spec in TOOLS
    ]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        return mt.ListToolsResult(tools=listed)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: mt.CallToolRequestParams
    ) -> mt.CallToolResult:
        spec = specs.get(params.name)
        if spec is None:
            return _error(f"no tool named {params.name!r}; tools: {', '.join(specs)}")
        try:
            args = spec.args_model.model_validate(params.arguments or {})
        except ValidationError as exc:
            return _error(_validation_message(spec.name, exc))
        try:
            answer = await spec.run(deps, args)
        except UserError as exc:
            return _error(str(exc))
        except UDAError as exc:
            # A backend failure: say so plainly, without a traceback over the wire.
            return _error(f"UDA could not answer ({type(exc).__name__}): {exc}")
        data = answer.model_dump(mode="json")
        return mt.CallToolResult(
            content=[mt.TextContent(text=json.dumps(data, ensure_ascii=False))],
            structured_content=data,
        )

    return Server(
        name,
        version=uda.__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _add_options(parser: argparse.ArgumentParser, *, path_default: Any) -> None:
    parser.add_argument(
        "--clearance",
        action="append",
        default=None,
        metavar="ENTRY",
        help="the clearance every tool call runs with: a level (public, internal, "
        "confidential, restricted) or project:<name> / project:*; repeat or comma-separate "
        "(default: public). Tool arguments can never change it.",
    )
    parser.add_argument(
        "--export-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="the one folder export_query may write files into (default: none, and "
        "export_query refuses); the tool names a new file, never a path",
    )
    # Inside `uda`, --path and --profile are also global options; SUPPRESS keeps a value
    # given before `mcp` from being overwritten by this subcommand's default.
    parser.add_argument(
        "--path",
        type=Path,
        default=path_default,
        help="data folder of the embedded profile (default: $UDA_PATH or ./.uda)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=path_default,
        help="a .toml profile naming connectors and search defaults",
    )


def add_mcp_parser(commands: Any) -> argparse.ArgumentParser:
    """Add the `mcp` command to the `uda` command's subparsers."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "mcp",
        help="serve the read-only agent tools to MCP clients over stdio",
        description="Serve auto_search, search, refine_search, get_result, expand and the "
        "discovery tools to an MCP client over stdin/stdout. Nothing can be written "
        "through it, and the clearance is fixed by --clearance.",
    )
    _add_options(parser, path_default=argparse.SUPPRESS)
    return parser


def clearance_entries(values: Sequence[str] | None) -> list[str]:
    """`--clearance` values (repeated or comma-separated), defaulting to `public`.

    Raises:
        UnknownClearanceError: an entry is not valid.
    """
    from uda.query.clearance import Clearance

    entries = [e.strip() for v in (values or DEFAULT_CLEARANCE) for e in v.split(",") if e.strip()]
    Clearance.parse(entries)
    return entries


@asynccontextmanager
async def _open_client(args: argparse.Namespace) -> AsyncGenerator[AsyncClient]:
    import uda

    profile: Path | None = getattr(args, "profile", None)
    path: Path | None = getattr(args, "path", None)
    if profile is not None:
        client = uda.aconnect(profile, path=path)
    else:
        client = uda.aconnect(path=path or os.environ.get("UDA_PATH") or ".uda")
    async with client:
        yield client


async def serve_stdio(args: argparse.Namespace, clearance: Sequence[str]) -> None:
    """Open the profile and serve MCP over this process's stdin and stdout."""
    from mcp.server.stdio import stdio_server

    # Claim stdout for the protocol first: the transport then points file descriptor 1 at
    # stderr, so whatever the backends print while they open cannot corrupt the wire.
    async with stdio_server() as (read, write), _open_client(args) as client:
        server = build_mcp_server(client, clearance, export_dir=getattr(args, "export_dir", None))
        await server.run(read, write, server.create_initialization_options())


def run_mcp(args: argparse.Namespace) -> int:
    """Run `uda mcp` until the client disconnects; returns the exit code.

    Raises:
        UserError: a bad clearance entry or profile (the `uda` command maps it to exit 2).
    """
    import anyio

    clearance = clearance_entries(args.clearance)
    print(f"uda mcp: serving over stdio with clearance {', '.join(clearance)}", file=sys.stderr)
    anyio.run(serve_stdio, args, clearance)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m uda.agent.mcp_server`: the same as `uda mcp`."""
    from uda.errors import UserError

    parser = argparse.ArgumentParser(prog="uda-mcp", description=add_mcp_parser.__doc__)
    _add_options(parser, path_default=None)
    args = parser.parse_args(argv)
    try:
        return run_mcp(args)
    except UserError as exc:
        print(f"uda mcp: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
