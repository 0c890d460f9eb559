"""The discovery and export tools: `discover_filter_paths`, `get_valid_operators`, `export_query`.

Discovery answers from the same sources the planner validates against (`uda.query.discovery`),
with the values counted under the deps' clearance. `export_query` writes an earlier search's
every match (up to `max_rows`) to a file — but only into the folder the deployment named
(`UDADeps.export_dir`, `uda mcp --export-dir`), never anywhere a model says: the model gives
a plain file name (letters, digits, `-`, `_`), the extension follows the format, the file is
created new (an existing one is never overwritten or followed through a link), and without
an export folder the tool refuses and says why. The export runs with the deps' clearance,
page by page, as the searches themselves would.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import re
import time
from pathlib import Path
from typing import Any

from uda.agent.data_models import (
    FILE_NAME,
    DiscoverPathsArgs,
    ExportAnswer,
    ExportArgs,
    FilterPathsAnswer,
    OperatorsAnswer,
    OperatorsArgs,
)
from uda.agent.deps import UDADeps
from uda.agent.state import QuerySpec
from uda.errors import UserError
from uda.query import discovery
from uda.query.contracts import SearchOptions, search_request
from uda.query.export import EXTENSIONS, PAGE_ROWS, export_to


class ExportRefusedError(UserError):
    """`export_query` cannot write: no export folder, or the file name is taken."""


NO_FOLDER = (
    "export_query is turned off here: this deployment has no export folder, and agents may "
    "not write files anywhere else. Tell the user that exports need an operator to configure "
    "an export folder (UDADeps(export_dir=...) or `uda mcp --export-dir DIR`); the results "
    "themselves are available through the search tools."
)


async def discover_filter_paths(deps: UDADeps, args: DiscoverPathsArgs) -> FilterPathsAnswer:
    """Every path filters may name (relation paths too), with the values the caller may see."""
    fields: Any = getattr(deps.client, "fields", None)
    if fields is None:  # a client without discovery: the paths, without values
        paths = discovery.filter_paths(args.prefix)
    elif inspect.iscoroutinefunction(fields):
        paths = await fields(args.prefix, list(deps.clearance), values=args.values)
    else:
        paths = await asyncio.to_thread(
            fields, args.prefix, list(deps.clearance), values=args.values
        )
    note = None
    if not paths:
        note = "no path starts with that prefix; call discover_filter_paths without one"
    return FilterPathsAnswer(paths=list(paths), note=note)


async def get_valid_operators(deps: UDADeps, args: OperatorsArgs) -> OperatorsAnswer:
    """The operators of every field type, or of one path (an unknown path names `path`)."""
    table = discovery.operators()
    answer = OperatorsAnswer(
        types=table.types,
        descriptions=table.descriptions,
        max_depth=table.max_depth,
        max_comparisons=table.max_comparisons,
    )
    if args.path is None:
        return answer
    found = discovery.find_path(args.path)
    return answer.model_copy(
        update={"path": found.path, "path_type": found.type, "path_operators": found.operators}
    )


def _context_filters(spec: QuerySpec) -> dict[str, Any]:
    """The spec's flat filters and tree, ANDed, as `uda.agent.tools.run_search` sends them."""
    if not spec.where:
        return dict(spec.filters)
    if not spec.filters:
        return dict(spec.where)
    return {"$and": [dict(spec.where), dict(spec.filters)]}


def _folder(deps: UDADeps) -> Path:
    if deps.export_dir is None:
        raise ExportRefusedError(NO_FOLDER, field="export_dir")
    folder = Path(deps.export_dir)
    if not folder.is_dir():
        raise ExportRefusedError(
            "export_query cannot write: the deployment's export folder does not exist; tell "
            "the user an operator must create it",
            field="export_dir",
        )
    return folder.resolve()


async def export_query(deps: UDADeps, args: ExportArgs) -> ExportAnswer:
    """Every match of an earlier search, written to a new file in the export folder."""
    folder = _folder(deps)
    record = deps.conversation.get(args.query_id, deps.clearance)
    name = args.file_name or f"{record.query_id}-{time.strftime('%Y%m%dT%H%M%S')}"
    if not re.fullmatch(FILE_NAME, name):  # the model's schema says so; checked again here
        raise ExportRefusedError(
            f"file_name: {name!r} is not a plain name (letters, digits, - and _)",
            field="file_name",
            value=name,
        )
    target = folder / (name + EXTENSIONS[args.format])
    spec = record.spec
    options: SearchOptions = {} if spec.depth is None else {"expand_depth": spec.depth}
    if spec.order_by is not None:
        options["order_by"] = spec.order_by
    if spec.element_types is not None:
        options["element_types"] = list(spec.element_types)
    if spec.query is not None and record.weights:
        options["weights"] = dict(record.weights)  # the weights the search ranked with
    request = search_request(
        spec.query, PAGE_ROWS, deps.clearance, _context_filters(spec), **options
    )
    try:
        # "x": a new file only; an existing name, or a link planted under it, is refused.
        sink = target.open("xb")
    except FileExistsError:
        raise ExportRefusedError(
            f"file_name: {target.name} exists in the export folder; choose another file_name",
            field="file_name",
            value=name,
        ) from None
    try:
        with sink:
            report = await export_to(
                deps.run, request, format=args.format, sink=sink, max_rows=args.max_rows
            )
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(target)
        raise
    note = f"every match was written to {target.name} in the export folder"
    if report.truncated:
        note = f"stopped at max_rows={args.max_rows}: more rows match; {target.name} has the first"
    degraded = [d.describe() for d in report.degraded]
    if degraded:
        note += "; partial: " + "; ".join(degraded) + ". Export again shortly for a full one."
    return ExportAnswer(
        query_id=record.query_id,
        file=target.name,
        format=args.format,
        rows=report.rows,
        truncated=report.truncated,
        degraded=degraded,
        note=note,
    )


__all__ = [
    "NO_FOLDER",
    "ExportRefusedError",
    "discover_filter_paths",
    "export_query",
    "get_valid_operators",
]
