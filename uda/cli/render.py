"""How the `uda` command prints results: a readable table, JSON, or an Arrow IPC stream."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO, cast

import pyarrow as pa

from uda.errors import InvalidRequestError
from uda.query.contracts import SearchResult
from uda.query.deadlines import Degradation
from uda.query.results import ResultViews


def _one_line(text: str | None, width: int) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    prose = [ln for ln in lines if not ln.startswith(("#", "=", "-", "*"))] or lines or [""]
    line = " ".join(prose)
    return line if len(line) <= width else line[: max(width - 1, 0)] + "…"


def _context(result: SearchResult) -> str:
    groups: dict[str, list[str]] = {}
    labels = {"partOf": "repo", "governedBy": "decision", "authoredBy": "author"}
    for node in result.context_nodes:
        if node["direction"] != "out" or node["depth"] != 1:
            continue
        relation = str(node["relation"])
        label = labels.get(relation, relation)
        groups.setdefault(label, []).append(str(node["name"]))
    return "; ".join(f"{label}: {', '.join(names[:3])}" for label, names in groups.items())


def table(pages: Sequence[ResultViews], *, ranked: bool = True) -> str:
    """Score (or date, unranked), type, name, a one-line snippet and each result's context."""
    results = [result for page in pages for result in page.results]
    if not results:
        return "no results (nothing matched, or nothing your clearance may see)"
    width = max(shutil.get_terminal_size((120, 20)).columns, 60)
    lines: list[str] = []
    for position, result in enumerate(results, start=1):
        lead = f"{result.score:.4f}" if ranked else str(result.properties.get("timestamp"))[:10]
        head = f"{position:>2}. {lead}  {result.element_type:<9} {result.name}"
        lines.append(head[:width])
        lines.append("      " + _one_line(result.snippet, width - 6))
        context = _context(result)
        if context:
            lines.append(("      " + context)[:width])
    return "\n".join(lines)


def as_json(pages: Sequence[ResultViews], *, explain: bool) -> str:
    """The pages' results, the cursor of the page after them (and the explanations) as JSON."""
    payload: dict[str, Any] = {
        "results": [r.model_dump(mode="json") for page in pages for r in page.results],
        "next_cursor": pages[-1].next_cursor,
        "query_id": pages[0].query_id,
        "degraded": [d.to_dict() for d in degraded(pages)],
    }
    if explain:
        explained = [page.explain().to_dict() for page in pages]
        payload["explain"] = explained[0] if len(explained) == 1 else explained
    return json.dumps(payload, indent=2, default=str)


def degraded(pages: Sequence[ResultViews]) -> list[Degradation]:
    """The backends any of the pages was answered without, each once."""
    seen: dict[tuple[str, str], Degradation] = {}
    for page in pages:
        for d in page.degraded:
            seen.setdefault((d.backend, d.leg), d)
    return list(seen.values())


def warn_if_degraded(pages: Sequence[ResultViews]) -> bool:
    """One warning line on standard error per backend left out; whether anything is missing.

    A standby passed over leaves nothing out: another server gave the whole answer.
    """
    left_out = degraded(pages)
    for d in left_out:
        print(f"warning: degraded answer: {d.describe()}", file=sys.stderr)
    return any(d.incomplete for d in left_out)


def emit(text: str, output: Path | None) -> None:
    """Text to standard output, or to `output` (with a final newline)."""
    if output is None:
        print(text)
    else:
        output.write_text(text + "\n")


def refuse_binary_on_terminal(args: Any) -> None:
    """Refuse `--format arrow` to a terminal: binary there helps nobody and breaks the tty.

    Raises:
        InvalidRequestError: naming `--format` (the command exits 2).
    """
    if args.format == "arrow" and args.output is None and sys.stdout.isatty():
        raise InvalidRequestError(
            "--format arrow writes binary: add --output FILE or pipe stdout",
            field="--format",
            value="arrow",
        )


def write_arrow(pages: Sequence[ResultViews], sink: BinaryIO) -> None:
    """The pages' results as one Arrow IPC stream in the documented result schema."""
    table = pa.concat_tables([page.to_arrow() for page in pages])
    # typeshed calls stdout's buffer a BinaryIO; pyarrow's stubs want an IOBase. It is one.
    out = pa.PythonFile(cast("Any", sink), mode="w")
    with pa.ipc.new_stream(out, table.schema) as writer:
        writer.write_table(table)


def counts(title: str, values: dict[str, Any], keys: Sequence[str] | None = None) -> str:
    """`title: a=1, b=2` for reports."""
    shown = keys or list(values)
    return f"{title}: " + ", ".join(f"{k}={values[k]}" for k in shown if k in values)
